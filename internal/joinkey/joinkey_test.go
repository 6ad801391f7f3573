package joinkey

import (
	"strings"
	"testing"
)

func TestSignVerify(t *testing.T) {
	tok, err := New()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New()
	back, err := Parse(tok.String())
	if err != nil || back.Public() != tok.Public() {
		t.Fatalf("parse round trip: %v", err)
	}
	sig := tok.Sign("n1", "a1", 7)
	for _, tc := range []struct {
		name      string
		pub, node string
		agent     string
		seq       int64
		sig       string
		want      bool
	}{
		{"good", tok.Public(), "n1", "a1", 7, sig, true},
		{"other node", tok.Public(), "n2", "a1", 7, sig, false},
		{"other agent", tok.Public(), "n1", "a2", 7, sig, false},
		{"other seq", tok.Public(), "n1", "a1", 8, sig, false},
		{"other key", other.Public(), "n1", "a1", 7, sig, false},
		{"garbage sig", tok.Public(), "n1", "a1", 7, "!!", false},
		{"garbage key", "zz", "n1", "a1", 7, sig, false},
		{"empty sig", tok.Public(), "n1", "a1", 7, "", false},
	} {
		if got := Verify(tc.pub, tc.node, tc.agent, tc.seq, tc.sig); got != tc.want {
			t.Errorf("%s: Verify = %v, want %v", tc.name, got, tc.want)
		}
	}
	if strings.Contains(tok.Public(), strings.TrimPrefix(tok.String(), prefix)) {
		t.Fatal("public half contains the token")
	}
}

func FuzzParse(f *testing.F) {
	tok, _ := New()
	f.Add(tok.String())
	f.Add("tyjoin1.")
	f.Add("deadbeef")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := Parse(s)
		if err != nil {
			return
		}
		if back, err := Parse(k.String()); err != nil || back.Public() != k.Public() {
			t.Fatalf("round trip of %q: %v", s, err)
		}
	})
}
