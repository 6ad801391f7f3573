package names

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestKinds(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		ok   []string
		bad  []string
	}{
		{Cluster, []string{"lab", "dev-2", "a"}, []string{"", "Lab", "-lab", "lab-", "la_b", "a/b", strings.Repeat("a", 64)}},
		{Node, []string{"node-a", "gpu01.lab", "N_1"}, []string{"", ".hidden", "../x", "a/b", "a b", "a\x00", strings.Repeat("a", 64)}},
		{Plugin, []string{"cartpole", "CartPole-v1", "kinrow.hex8_2p"}, []string{"", "../x", "a/b", "-a", "a\nb"}},
		{Version, []string{"1", "1.2.0", "1.2.0-rc.1+build.5", "v2_beta"}, []string{"", "../1", "1/2", "1..2", ".1", "1.", "1\x00", "1\n", "1 2", strings.Repeat("1", 65)}},
		{EnvKey, []string{"A", "_X", "CUDA_VISIBLE_DEVICES", "lower_ok"}, []string{"", "1A", "A-B", "A=B", "../A", "A\x00", "A B", strings.Repeat("A", 129)}},
		{Endpoint, []string{"llm", "arith-1b", "tuner_2"}, []string{"", "LLM", "-x", "a/b", "a.b"}},
		{Config, []string{"hex8_2p", "square19_4p"}, []string{"", "Hex8", "a/b", "../a"}},
		{User, []string{"nobody", "trainyard-job", "_svc", "65534"}, []string{"", "Root", "-x", "a b", "a/b", "a\x00", "1a", strings.Repeat("a", 33)}},
		{Label, []string{"", "my run", "Lauf über Nacht ✓", strings.Repeat("a", 128)}, []string{"a\x00b", "a\nb", "a\x1b[31m", strings.Repeat("a", 129), "\xff"}},
	} {
		for _, s := range tc.ok {
			if err := tc.kind.Check(s); err != nil {
				t.Errorf("%s %q: %v, want ok", tc.kind.what, s, err)
			}
		}
		for _, s := range tc.bad {
			err := tc.kind.Check(s)
			if err == nil {
				t.Errorf("%s %q: ok, want an error", tc.kind.what, s)
			} else if !strings.Contains(err.Error(), tc.kind.what) {
				t.Errorf("%s %q: %v does not say what was checked", tc.kind.what, s, err)
			}
		}
	}
}

// fuzzKind checks what every valid name of a kind must hold, whatever the
// rule: nothing that walks a path, ends a line or ends a C string.
func fuzzKind(f *testing.F, k Kind, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := k.Check(s)
		if err == nil {
			if strings.ContainsAny(s, "\x00\n\r") || !utf8.ValidString(s) {
				t.Fatalf("%s %q passed", k.what, s)
			}
			if k.re != nil && (strings.ContainsAny(s, "/\\") || strings.HasPrefix(s, ".")) {
				t.Fatalf("%s %q passed: it walks a path", k.what, s)
			}
		} else if len(err.Error()) > 600 {
			t.Fatalf("%s: an error of %d bytes", k.what, len(err.Error()))
		}
	})
}

func FuzzCluster(f *testing.F)  { fuzzKind(f, Cluster, "lab", "a-b", "../x") }
func FuzzNode(f *testing.F)     { fuzzKind(f, Node, "node-a", "n.1", "..") }
func FuzzPlugin(f *testing.F)   { fuzzKind(f, Plugin, "cartpole", "..", "a/b") }
func FuzzVersion(f *testing.F)  { fuzzKind(f, Version, "1.2.0", "../1", "1..2") }
func FuzzEnvKey(f *testing.F)   { fuzzKind(f, EnvKey, "A_B", "A=B", "\x00") }
func FuzzEndpoint(f *testing.F) { fuzzKind(f, Endpoint, "llm", "a/b") }
func FuzzConfig(f *testing.F)   { fuzzKind(f, Config, "hex8_2p", "a..b") }
func FuzzUser(f *testing.F)     { fuzzKind(f, User, "nobody", "65534", "../x") }
func FuzzLabel(f *testing.F)    { fuzzKind(f, Label, "my run", "a\x00", strings.Repeat("x", 200)) }
