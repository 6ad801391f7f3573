package main

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
)

// TestPprofNeverOnAgents: profiles are served for the control plane on a
// loopback address only, and never by an agent, whose heap holds its join
// token and whose host runs jobs that could ask for it.
func TestPprofNeverOnAgents(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		service, addr string
		serves        bool
	}{
		{"trainyard-dev", "127.0.0.1:0", true},
		{"trainyard-server", "127.0.0.1:0", true},
		{"trainyard-agent", "127.0.0.1:0", false},
		{"trainyard-dev", "0.0.0.0:0", false},
		{"trainyard-dev", "", false},
	} {
		t.Setenv("TRAINYARD_PPROF", tc.addr)
		l := servePprof(log, tc.service)
		if (l != nil) != tc.serves {
			t.Fatalf("%s on %q: serving %v, want %v", tc.service, tc.addr, l != nil, tc.serves)
		}
		if l == nil {
			continue
		}
		resp, err := http.Get("http://" + l.Addr().String() + "/debug/pprof/")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: GET /debug/pprof/: %v %v", tc.service, resp, err)
		}
		resp.Body.Close()
		l.Close()
	}
}
