package procenv

import (
	"bytes"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var hpcBase = []string{
	"PATH=/usr/bin:/bin", "HOME=/home/dhart", "USER=dhart", "LANG=C.UTF-8",
	"SLURM_JOB_ID=123", "MODULEPATH=/opt/modules", "CUDA_VISIBLE_DEVICES=0,1,2,3",
	"BASH_FUNC_module%%=() { eval ...", "WANDB_KEY=secret", "TZ=UTC", "noequals",
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name string
		base []string
		spec Spec
		want []string
		err  string
	}{
		{name: "default allow-list drops the rest and sets GPUs",
			base: hpcBase, spec: Spec{GPUs: []int{2}},
			want: []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=2", "HOME=/home/dhart", "LANG=C.UTF-8", "PATH=/usr/bin:/bin", "TZ=UTC", "USER=dhart"}},
		{name: "no GPUs is an empty CUDA_VISIBLE_DEVICES, not the inherited one",
			base: hpcBase, spec: Spec{Allow: []string{"PATH"}},
			want: []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=", "PATH=/usr/bin:/bin"}},
		{name: "explicit variables pass and win",
			base: hpcBase, spec: Spec{Allow: []string{"PATH", "WANDB_KEY"}, Extra: map[string]string{"WANDB_KEY": "mine", "RANK": "3", "WORLD_SIZE": "8"}, GPUs: []int{1, 0}},
			want: []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=1,0", "PATH=/usr/bin:/bin", "RANK=3", "WANDB_KEY=mine", "WORLD_SIZE=8"}},
		{name: "empty allow-list copies nothing", base: hpcBase, spec: Spec{Allow: []string{}},
			want: []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES="}},
		{name: "CUDA_VISIBLE_DEVICES cannot be passed", spec: Spec{Extra: map[string]string{"CUDA_VISIBLE_DEVICES": "0"}}, err: "set from the GPU assignment"},
		{name: "CUDA_VISIBLE_DEVICES cannot be allowed", spec: Spec{Allow: []string{"CUDA_VISIBLE_DEVICES"}}, err: "set from the GPU assignment"},
		{name: "bad name", spec: Spec{Extra: map[string]string{"A=B": "x"}}, err: "variable name"},
		{name: "leading digit", spec: Spec{Extra: map[string]string{"1A": "x"}}, err: "variable name"},
		{name: "NUL value", spec: Spec{Extra: map[string]string{"A": "x\x00y"}}, err: "NUL"},
		{name: "duplicate GPU", spec: Spec{GPUs: []int{1, 1}}, err: "assigned twice"},
		{name: "negative GPU", spec: Spec{GPUs: []int{-1}}, err: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Build(tt.base, tt.spec)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// A real child prints its environment: it must be exactly what Build made,
// whatever the parent's environment holds.
func TestChildSeesOnlyBuiltEnv(t *testing.T) {
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLURM_JOB_ID", "999")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
	tests := []struct {
		name string
		spec Spec
	}{
		{name: "one GPU", spec: Spec{GPUs: []int{3}, Extra: map[string]string{"RANK": "0"}}},
		{name: "no GPU", spec: Spec{}},
		{name: "two GPUs", spec: Spec{GPUs: []int{0, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := Build(append(hpcBase, "SLURM_JOB_ID=999"), tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			p, err := Start(Command{Path: envBin, Env: env, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Wait(); err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(out.String()), "\n")
			sort.Strings(got)
			if !reflect.DeepEqual(got, env) {
				t.Fatalf("child env %q\nwant      %q", got, env)
			}
		})
	}
}

// A nil Env must not mean "inherit".
func TestNilEnvInheritsNothing(t *testing.T) {
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLURM_JOB_ID", "999")
	var out bytes.Buffer
	p, err := Start(Command{Path: envBin, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Fatalf("child inherited %q", out.String())
	}
}
