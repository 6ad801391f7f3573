package spec_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/provision/local"
	"github.com/trainyard/trainyard/internal/provision/ssh"
	_ "github.com/trainyard/trainyard/internal/provision/static"
	"github.com/trainyard/trainyard/internal/resources"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want []string // substrings, each must appear
	}{
		{name: "empty", spec: "", want: []string{"cluster spec is empty"}},
		{name: "not yaml", spec: "name: [", want: []string{"cluster spec:"}},
		{name: "unknown top-level field", spec: "name: a\nnodez: []\n", want: []string{"nodez"}},
		{name: "unknown node field", spec: "name: a\nnodes:\n- name: n1\n  adress: x\n  provisioner: {kind: static}\n", want: []string{"adress"}},
		{name: "bad cluster name", spec: "name: My Lab\nnodes:\n- name: n1\n  provisioner: {kind: static}\n", want: []string{`cluster: name: "My Lab"`}},
		{name: "no nodes", spec: "name: a\n", want: []string{"at least one node"}},
		{name: "duplicate node names", spec: "name: a\nnodes:\n- {name: zinc, provisioner: {kind: static}}\n- {name: Zinc, provisioner: {kind: static}}\n",
			want: []string{`node "Zinc": name: duplicate node name (also node #1)`}},
		{name: "unknown provisioner", spec: "name: a\nnodes:\n- {name: nickel, provisioner: {kind: slurm}}\n",
			want: []string{`node "nickel": provisioner.kind: unknown provisioner "slurm"`}},
		{name: "missing provisioner", spec: "name: a\nnodes:\n- {name: nickel}\n", want: []string{`node "nickel": provisioner.kind: missing`}},
		{name: "ssh without address", spec: "name: a\nnodes:\n- {name: copper, provisioner: {kind: ssh}}\n",
			want: []string{`node "copper": address: required for the ssh provisioner`}},
		{name: "user in address", spec: "name: a\nnodes:\n- {name: copper, address: dhart@copper, provisioner: {kind: ssh}}\n",
			want: []string{`node "copper": address:`}},
		{name: "bad port", spec: "name: a\nnodes:\n- {name: copper, address: copper, provisioner: {kind: ssh, ssh: {port: 70000}}}\n",
			want: []string{`node "copper": provisioner.ssh.port`}},
		{name: "settings of another kind", spec: "name: a\nnodes:\n- {name: copper, provisioner: {kind: static, ssh: {user: x}}}\n",
			want: []string{`node "copper": provisioner.ssh: ssh settings given but the provisioner is "static"`}},
		{name: "a section no kind owns", spec: "name: a\nnodes:\n- {name: copper, address: c, provisioner: {kind: ssh, sssh: {user: x}}}\n",
			want: []string{`node "copper": provisioner.sssh: unknown field`}},
		{name: "unknown field of a kind's section", spec: "name: a\nnodes:\n- {name: copper, address: c, provisioner: {kind: ssh, ssh: {usr: x}}}\n",
			want: []string{`node "copper": provisioner.ssh:`, `unknown field "usr"`}},
		{name: "bad GPU description", spec: "name: a\nnodes:\n- {name: zinc, resources: {gpus: \"2xGTX 1080 Ti\"}, provisioner: {kind: static}}\n",
			want: []string{`node "zinc": resources.gpus:`, "want MODEL:VRAM"}},
		{name: "bad GPU list", spec: "name: a\nnodes:\n- {name: zinc, resources: {gpus: [{model: A, vram_mb: 0}]}, provisioner: {kind: static}}\n",
			want: []string{`node "zinc": resources.gpus: GPU 0: vram must be positive`}},
		{name: "unknown GPU list field", spec: "name: a\nnodes:\n- {name: zinc, resources: {gpus: [{model: A, vram: 1}]}, provisioner: {kind: static}}\n",
			want: []string{"vram"}},
		{name: "bad memory", spec: "name: a\nnodes:\n- {name: zinc, resources: {memory: lots}, provisioner: {kind: static}}\n",
			want: []string{`node "zinc": resources.memory:`}},
		{name: "negative cpus", spec: "name: a\nnodes:\n- {name: zinc, resources: {cpus: -1}, provisioner: {kind: static}}\n",
			want: []string{`node "zinc": resources.cpus`}},
		{name: "overlapping local GPUs", spec: "name: a\nnodes:\n- {name: head, provisioner: {kind: local, local: {gpus: [0, 1]}}}\n- {name: worker-1, provisioner: {kind: local, local: {gpus: [1]}}}\n",
			want: []string{`node "worker-1": provisioner.local.gpus: GPU 1 is already given to local node "head"`}},
		{name: "local GPUs disagree with resources", spec: "name: a\nnodes:\n- {name: head, resources: {gpus: \"0:A:1GB\"}, provisioner: {kind: local, local: {gpus: [1]}}}\n",
			want: []string{`node "head": provisioner.local.gpus: [1] differs`}},
		{name: "unnamed node", spec: "name: a\nnodes:\n- {provisioner: {kind: static}}\n", want: []string{`node "#1": name:`}},
		{name: "several problems at once", spec: "name: a\nnodes:\n- {name: a1, provisioner: {kind: nope}}\n- {name: a2, provisioner: {kind: ssh}}\n",
			want: []string{`node "a1": provisioner.kind`, `node "a2": address`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := spec.Parse([]byte(tt.spec))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

func TestFieldErrorsAreInspectable(t *testing.T) {
	_, err := spec.Parse([]byte("name: a\nnodes:\n- {name: nickel, provisioner: {kind: slurm}}\n"))
	var fe *spec.FieldError
	if !errors.As(err, &fe) || fe.Node != "nickel" || fe.Field != "provisioner.kind" {
		t.Fatalf("errors.As FieldError: %+v from %v", fe, err)
	}
}

func TestDefaultsMerge(t *testing.T) {
	c, err := spec.Parse([]byte(`
name: a
defaults:
  provider: vast
  ephemeral: true
  labels: {tier: "3", role: selfplay}
  resources: {cpus: 8, memory: 32GiB, gpus: "RTX 3060:12GB"}
  provisioner: {kind: ssh, ssh: {user: root, port: 2222, key: /k, known_hosts: /kh}}
nodes:
  - {name: n1, address: h1}
  - name: n2
    address: h2
    ephemeral: false
    labels: {role: training}
    resources: {gpus: "2xRTX 4090:24GB"}
    provisioner: {kind: ssh, ssh: {port: 22}}
  - {name: n3, provisioner: {kind: static}}
`))
	if err != nil {
		t.Fatal(err)
	}
	sshOf := func(n spec.Node) ssh.Settings {
		s, err := ssh.SettingsOf(n)
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		return s
	}
	want := []spec.Node{
		{Name: "n1", Address: "h1", Provider: "vast", Ephemeral: true, Labels: map[string]string{"tier": "3", "role": "selfplay"},
			Resources:   resources.Capacity{CPUs: 8, MemoryMB: 32768, GPUs: []resources.GPU{{Index: 0, Model: "RTX 3060", VRAMMB: 12288}}},
			Provisioner: spec.Provisioner{Kind: "ssh"}},
		{Name: "n2", Address: "h2", Provider: "vast", Ephemeral: false, Labels: map[string]string{"tier": "3", "role": "training"},
			Resources:   resources.Capacity{CPUs: 8, MemoryMB: 32768, GPUs: []resources.GPU{{Index: 0, Model: "RTX 4090", VRAMMB: 24576}, {Index: 1, Model: "RTX 4090", VRAMMB: 24576}}},
			Provisioner: spec.Provisioner{Kind: "ssh"}},
		{Name: "n3", Provider: "vast", Ephemeral: true, Labels: map[string]string{"tier": "3", "role": "selfplay"},
			Resources:   resources.Capacity{CPUs: 8, MemoryMB: 32768, GPUs: []resources.GPU{{Index: 0, Model: "RTX 3060", VRAMMB: 12288}}},
			Provisioner: spec.Provisioner{Kind: "static"}},
	}
	// The ssh sections, field by field: the defaults', the node's port.
	wantSSH := []ssh.Settings{{User: "root", Port: 2222, KeyPath: "/k", KnownHostsPath: "/kh"}, {User: "root", Port: 22, KeyPath: "/k", KnownHostsPath: "/kh"}}
	for i, w := range wantSSH {
		if got := sshOf(c.Nodes[i]); got != w {
			t.Errorf("%s: ssh settings %+v, want %+v", c.Nodes[i].Name, got, w)
		}
	}
	if len(c.Nodes[2].Provisioner.Settings) != 0 {
		t.Errorf("n3 (static): settings %s, want none", c.Nodes[2].Provisioner.Settings)
	}
	got := append([]spec.Node{}, c.Nodes...)
	for i := range got {
		got[i].Provisioner.Settings = nil
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(c.Nodes, "", " ")
		t.Fatalf("got %s", g)
	}
}

// The API's JSON form (what Cluster marshals to) parses back to the same
// cluster.
func TestJSONRoundTrip(t *testing.T) {
	c1, err := spec.ParseFile("../../../deploy/examples/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c1)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := spec.Parse(b)
	if err != nil {
		t.Fatalf("parse own JSON %s: %v", b, err)
	}
	if !reflect.DeepEqual(c1, c2) {
		t.Fatalf("round trip differs:\n%+v\n%+v", c1, c2)
	}
}

func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../../../deploy/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	type want struct {
		nodes, gpus int
		vramGiB     int
		ephemeral   int
		byKind      map[string]int
	}
	wants := map[string]want{
		// Seed 001: 8 GPUs, ~90GB VRAM (3x12 + 2x11 + 12 + 12 + 6).
		"lab.yaml": {nodes: 5, gpus: 8, vramGiB: 88, byKind: map[string]int{"local": 1, "ssh": 4}},
		// Seed 002: the 19 named machines; 12 Vast.ai ones are ephemeral.
		// VRAM by provider: Vast.ai 629 ("~600GB"), RunPod 288, Nebius 48,
		// Vultr 20.
		"fleet.yaml": {nodes: 19, gpus: 33, vramGiB: 629 + 288 + 48 + 20, ephemeral: 12, byKind: map[string]int{"local": 1, "ssh": 18}},
		// Seed 000: 6 GPU + 2 CPU nodes.
		"g5-pool.yaml": {nodes: 8, gpus: 6, vramGiB: 6 * 23028 / 1024, byKind: map[string]int{"static": 8}},
		// Seed 004: head + 2 workers, GPUs 0, 1, 2.
		"local.yaml": {nodes: 3, gpus: 3, vramGiB: 36, byKind: map[string]int{"local": 3}},
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := spec.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			w, ok := wants[filepath.Base(f)]
			if !ok {
				t.Fatalf("example %s has no expectations in this test", f)
			}
			capa := c.Capacity()
			kinds := map[string]int{}
			eph := 0
			for _, n := range c.Nodes {
				kinds[n.Provisioner.Kind]++
				if n.Ephemeral {
					eph++
				}
			}
			if len(c.Nodes) != w.nodes || len(capa.GPUs) != w.gpus || capa.TotalVRAMMB()/1024 != w.vramGiB || eph != w.ephemeral || !reflect.DeepEqual(kinds, w.byKind) {
				t.Fatalf("%d nodes, %d GPUs, %d GiB VRAM, %d ephemeral, kinds %v; want %+v",
					len(c.Nodes), len(capa.GPUs), capa.TotalVRAMMB()/1024, eph, kinds, w)
			}
		})
	}
	// Seed 000's totals: 6x7.5 + 2x63.5 CPUs, 6x30 + 2x127 GiB.
	c, err := spec.ParseFile("../../../deploy/examples/g5-pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if capa := c.Capacity(); capa.CPUs != 172 || capa.MemoryMB != (180+254)*1024 {
		t.Fatalf("g5 pool capacity %+v", capa)
	}
	// Seed 001: platinum is the head, on GPU 0, with the GTX 1660.
	lab, err := spec.ParseFile("../../../deploy/examples/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := lab.Node("platinum")
	if !ok || p.GPUDescription() != "0:GTX 1660:6144" || !reflect.DeepEqual(local.GPUs(p), []int{0}) {
		t.Fatalf("platinum: %+v", p)
	}
	if n, _ := lab.Node("nickel"); n.Provisioner.Kind != "ssh" || sshSettings(t, n).User != "dhart" {
		t.Fatalf("nickel: %+v", n)
	}
}

func TestParseFileMissing(t *testing.T) {
	_, err := spec.ParseFile(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}

func sshSettings(t *testing.T, n spec.Node) ssh.Settings {
	t.Helper()
	s, err := ssh.SettingsOf(n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
