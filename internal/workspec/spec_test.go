package workspec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const seed000YAML = `
name: zelda-production
kind: rollout
config: zelda
rollout:
  workers: 7
  envs_per_worker: 12
  episode_length: 61440
  batch_size: 32768
roles:
  - name: rollout_worker
    cpus: 6
    memory_mb: 24000
    gpus: 0
    max_concurrency: 100
    anti_affinity: [{key: role, values: [rollout_worker]}]
`

func TestParseSeed000(t *testing.T) {
	s, err := Parse([]byte(seed000YAML))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("seed spec invalid: %v", err)
	}
	if got := s.Roles[0].Count; got != 7 {
		t.Errorf("rollout_worker count = %d, want 7 (rollout.workers)", got)
	}
	if got := s.TotalEnvs(); got != 84 {
		t.Errorf("TotalEnvs = %d, want 84 (7 workers x 12 envs)", got)
	}
}

func TestParseRejectsUnknownFields(t *testing.T) {
	for _, in := range []string{
		"name: x\nkind: rollout\nroles: []\nbogus: 1\n",
		`{"name":"x","kind":"rollout","roles":[],"bogus":1}`,
	} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q) accepted an unknown field", in)
		}
	}
}

func TestDefaultsAndEnvOverrides(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    Rollout
		count   int
		wantErr string
	}{
		{name: "defaults", env: nil, want: Rollout{3, 3, 30720, 4096}, count: 3},
		{name: "seed production", env: map[string]string{"RAY_WORKERS": "84", "ENVS_PER_WORKER": "12", "EPISODE_LENGTH": "61440", "BATCH_SIZE": "32768"}, want: Rollout{84, 12, 61440, 32768}, count: 84},
		{name: "partial", env: map[string]string{"BATCH_SIZE": "8192"}, want: Rollout{3, 3, 30720, 8192}, count: 3},
		{name: "empty value ignored", env: map[string]string{"RAY_WORKERS": ""}, want: Rollout{3, 3, 30720, 4096}, count: 3},
		{name: "malformed", env: map[string]string{"EPISODE_LENGTH": "lots"}, wantErr: `env EPISODE_LENGTH="lots": must be a positive integer`},
		{name: "negative", env: map[string]string{"RAY_WORKERS": "-1"}, wantErr: `env RAY_WORKERS="-1": must be a positive integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte("name: r\nkind: rollout\nroles: [{name: rollout_worker, cpus: 1, memory_mb: 100}]\n"))
			if err != nil {
				t.Fatal(err)
			}
			err = s.ApplyEnv(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Rollout != tt.want {
				t.Errorf("rollout = %+v, want %+v", s.Rollout, tt.want)
			}
			if s.Roles[0].Count != tt.count {
				t.Errorf("rollout_worker count = %d, want %d", s.Roles[0].Count, tt.count)
			}
			if got := s.Env()["BATCH_SIZE"]; got == "" {
				t.Errorf("Env() lacks BATCH_SIZE")
			}
		})
	}
}

func TestValidateFieldErrors(t *testing.T) {
	valid := func() Spec {
		return Spec{Name: "job", Kind: KindTraining, Config: "hexagonal_4p", Roles: []Role{
			{Name: "trainer", Count: 1, CPUs: 4, GPUs: 1, MemoryMB: 1000, Group: "train"},
			{Name: "trajectory_pool", Count: 1, CPUs: 1, MemoryMB: 1000, Group: "train"},
		}, Groups: []Group{{Name: "train", Strategy: StrictPack}}}
	}
	tests := []struct {
		name   string
		mutate func(*Spec)
		want   []FieldError
	}{
		{"valid", func(*Spec) {}, nil},
		{"negative gpus", func(s *Spec) { s.Roles[1].GPUs = -0.5 }, []FieldError{{"roles[1].gpus", "must be >= 0"}}},
		{"fractional gpus above one", func(s *Spec) { s.Roles[0].GPUs = 1.5 }, []FieldError{{"roles[0].gpus", "must be a whole number above 1 (fractions share one device)"}}},
		{"quarter gpu ok", func(s *Spec) { s.Roles[0].GPUs = 0.25 }, nil},
		{"zero count", func(s *Spec) { s.Roles[0].Count = 0 }, []FieldError{{"roles[0].count", "must be >= 1"}}},
		{"no resources", func(s *Spec) { s.Roles[1].CPUs = 0 }, []FieldError{{"roles[1].cpus", "must be > 0 for a role without GPUs"}}},
		{"duplicate role", func(s *Spec) { s.Roles[1].Name = "trainer" }, []FieldError{{"roles[1].name", "duplicates roles[0]"}}},
		{"bad kind", func(s *Spec) { s.Kind = "party" }, []FieldError{{"kind", "must be one of training, selfplay, evaluation, rollout, job, sweep-trial"}}},
		{"bad strategy", func(s *Spec) { s.Groups[0].Strategy = "CLUMP" }, []FieldError{{"groups[0].strategy", "must be one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD"}}},
		{"group without roles", func(s *Spec) { s.Groups = append(s.Groups, Group{"ghost", Pack}) }, []FieldError{{"groups[1].name", `no role is in group "ghost"`}}},
		{"empty selector key", func(s *Spec) { s.Roles[0].AntiAffinity = []Selector{{}} }, []FieldError{{"roles[0].anti_affinity[0].key", "must not be empty"}}},
		{"prefer and avoid", func(s *Spec) { s.Providers = Providers{Prefer: []string{"vast"}, Avoid: []string{"vast"}} }, []FieldError{{"providers", "vast is both preferred and avoided"}}},
		{"several at once", func(s *Spec) { s.Roles[0].GPUs = -1; s.Roles[1].MemoryMB = -1; s.Tiers = []int{0} },
			[]FieldError{{"roles[0].gpus", "must be >= 0"}, {"roles[1].memory_mb", "must be >= 0"}, {"tiers[0]", "must be >= 1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid()
			tt.mutate(&s)
			err := s.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var fes FieldErrors
			if !errors.As(err, &fes) {
				t.Fatalf("err = %v, want FieldErrors", err)
			}
			if !reflect.DeepEqual([]FieldError(fes), tt.want) {
				t.Errorf("errors = %v, want %v", fes, tt.want)
			}
		})
	}
}

func TestSelectorAndHelpers(t *testing.T) {
	tests := []struct {
		sel    Selector
		labels map[string]string
		want   bool
	}{
		{Selector{Key: "gpu"}, map[string]string{"gpu": "a100"}, true},
		{Selector{Key: "gpu"}, map[string]string{}, false},
		{Selector{Key: "zone", Values: []string{"a", "b"}}, map[string]string{"zone": "b"}, true},
		{Selector{Key: "zone", Values: []string{"a", "b"}}, map[string]string{"zone": "c"}, false},
	}
	for _, tt := range tests {
		if got := tt.sel.Matches(tt.labels); got != tt.want {
			t.Errorf("%+v.Matches(%v) = %v, want %v", tt.sel, tt.labels, got, tt.want)
		}
	}
	s := Spec{Config: "hexagonal_4p", Groups: []Group{{"g", StrictSpread}}}
	if s.BoardName() != "hexagonal" || s.GroupStrategy("g") != StrictSpread || s.GroupStrategy("other") != Pack {
		t.Errorf("BoardName=%q GroupStrategy(g)=%q GroupStrategy(other)=%q", s.BoardName(), s.GroupStrategy("g"), s.GroupStrategy("other"))
	}
}

// TestShippedJobsParse: the job files the README submits are valid work
// descriptions.
func TestShippedJobsParse(t *testing.T) {
	files, err := filepath.Glob("../../deploy/jobs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no job files: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(raw)
		if err == nil {
			s.Name = "example"
			err = s.Validate()
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
