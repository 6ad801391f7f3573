package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoleAllows(t *testing.T) {
	tests := []struct {
		have, need Role
		want       bool
	}{
		{Viewer, Viewer, true},
		{Viewer, Operator, false},
		{Viewer, Admin, false},
		{Operator, Viewer, true},
		{Operator, Operator, true},
		{Operator, Admin, false},
		{Admin, Admin, true},
		{Admin, Viewer, true},
		{Role("root"), Viewer, false},
		{Role(""), Viewer, false},
	}
	for _, tc := range tests {
		if got := tc.have.Allows(tc.need); got != tc.want {
			t.Errorf("%q.Allows(%q) = %v, want %v", tc.have, tc.need, got, tc.want)
		}
	}
}

func TestStoreRoundTripHashedAndPersisted(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.json")
	s, err := Open(file)
	if err != nil {
		t.Fatal(err)
	}
	secret, tok, err := s.Create("ci", Operator)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(file)
	if strings.Contains(string(raw), secret) {
		t.Fatal("token secret stored in clear text")
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	reopened, err := Open(file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := reopened.Authenticate(secret)
	if err != nil || got.ID != tok.ID || got.Role != Operator {
		t.Fatalf("authenticate after reopen: %+v, %v", got, err)
	}
	if _, err := reopened.Authenticate(secret + "x"); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("wrong secret: got %v", err)
	}
	if err := reopened.Revoke(tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := reopened.Authenticate(secret); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("revoked token still accepted: %v", err)
	}
	if _, _, err := s.Create("x", Role("root")); err == nil {
		t.Fatal("unknown role accepted")
	}
}

// TestReplicasShareTheStore: two `server` replicas on one token file. A
// token created through one works at the other at once, and a token
// revoked through either is refused by both.
func TestReplicasShareTheStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.json")
	a, err := Open(file)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(file)
	if err != nil {
		t.Fatal(err)
	}
	secret, tok, err := a.Create("ci", Operator)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Authenticate(secret); err != nil || got.ID != tok.ID {
		t.Fatalf("replica b: %+v, %v; want the token created through a", got, err)
	}
	other, _, err := b.Create("dashboard", Viewer)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Revoke(tok.ID); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Store{"a": a, "b": b} {
		if _, err := s.Authenticate(secret); !errors.Is(err, ErrUnknownToken) {
			t.Errorf("replica %s: revoked token: %v, want refused", name, err)
		}
		if _, err := s.Authenticate(other); err != nil {
			t.Errorf("replica %s: the other replica's token: %v", name, err)
		}
		if s.Len() != 1 {
			t.Errorf("replica %s: %d tokens, want 1", name, s.Len())
		}
	}
}
