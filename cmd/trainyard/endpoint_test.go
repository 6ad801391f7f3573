package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
)

func TestEndpointCheckAndChat(t *testing.T) {
	up := inferencetest.Start(t, "m1")
	up.Answer = func([]inference.ChatMessage) string { return "42" }
	c := &spec.Cluster{Name: "lab", Endpoints: []inference.Endpoint{
		{Name: "up", URL: up.URL, Model: "m1"},
		{Name: "down", URL: "http://127.0.0.1:1", Model: "m1"},
	}}
	for _, tc := range []struct {
		names   []string
		wantErr string
		wantOut []string
	}{
		{[]string{"up"}, "", []string{"up", "true", "m1"}},
		{nil, "endpoints down: down", []string{"up", "down", "false"}},
		{[]string{"nope"}, `no endpoint "nope"`, nil},
	} {
		var out bytes.Buffer
		err := checkEndpoints(t.Context(), &out, c, tc.names, 5*time.Second)
		if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("check %v: %v, want error %q", tc.names, err, tc.wantErr)
		}
		for _, w := range tc.wantOut {
			if !strings.Contains(out.String(), w) {
				t.Errorf("check %v: output lacks %q:\n%s", tc.names, w, out.String())
			}
		}
	}
	var out bytes.Buffer
	if err := chatEndpoint(t.Context(), &out, c, "up", "6*7?", 5*time.Second); err != nil || strings.TrimSpace(out.String()) != "42" {
		t.Fatalf("chat: %q, %v", out.String(), err)
	}
}
