package admission

import (
	"context"
	"os"
	"testing"

	"github.com/trainyard/trainyard/internal/embedded/s3test"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/policy"
)

// store is a bucket on a real S3 server (the embedded one, on loopback).
var store *objstore.Store

func TestMain(m *testing.M) {
	os.Exit(s3test.Main(m, "admission-test", func(s *objstore.Store, _ string) { store = s }))
}

// TestPushReachesOtherReplicas: a bundle pushed through one service (a
// server replica) goes in force in another on the same bucket (a second
// replica, a separate worker) at its next refresh, and only once.
func TestPushReachesOtherReplicas(t *testing.T) {
	ctx := context.Background()
	a, err := Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := b.Refresh(ctx); err != nil || changed {
		t.Fatalf("refresh before any push: changed %v, err %v", changed, err)
	}

	bundle, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	bundle.Modules["freeze.rego"] = `package trainyard.admission

import rego.v1

deny contains {"rule": "freeze", "reason": "frozen"} if input.work.kind == "frozen"
`
	pushed, _, err := a.Push(ctx, bundle)
	if err != nil {
		t.Fatal(err)
	}
	if b.Engine().Revision() == pushed.Revision() {
		t.Fatal("the other replica had the pushed bundle before refreshing")
	}
	if changed, err := b.Refresh(ctx); err != nil || !changed {
		t.Fatalf("refresh after a push elsewhere: changed %v, err %v", changed, err)
	}
	if got := b.Engine().Revision(); got != pushed.Revision() {
		t.Fatalf("other replica has revision %s, want the pushed %s", got, pushed.Revision())
	}
	for name, s := range map[string]*Service{"pusher": a, "refreshed": b} {
		if changed, err := s.Refresh(ctx); err != nil || changed {
			t.Fatalf("%s: refresh with nothing new: changed %v, err %v", name, changed, err)
		}
	}
	in := policy.Input{Work: policy.Work{ID: "w", Kind: "frozen", Roles: []policy.Role{{Name: "r", Count: 1, CPUs: 1, MemoryMB: 1}}},
		Cluster: policy.Cluster{Nodes: []policy.Node{{Name: "n", CPUs: 8, MemoryMB: 8000}}}}
	d, err := b.Decide(ctx, "w", in)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allow || len(d.Violations) != 1 || d.Violations[0].Rule != "freeze" {
		t.Fatalf("decision on the refreshed replica: %+v", d)
	}
}
