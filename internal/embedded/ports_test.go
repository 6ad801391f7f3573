package embedded

import (
	"context"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

func TestPickBand(t *testing.T) {
	for _, c := range []struct {
		lo, hi, from, to int
		ok               bool
	}{
		{32768, 60999, 61000, 65535, true}, // Linux's default: above
		{49152, 65535, 10000, 49151, true}, // IANA's: below
		{32768, 65000, 10000, 32767, true}, // 535 above, 22768 below
		{10200, 65000, 65001, 65535, true}, // little room either side: the larger
		{1024, 65535, 0, 0, false},         // no room at all
	} {
		from, to, ok := pickBand(c.lo, c.hi)
		if from != c.from || to != c.to || ok != c.ok {
			t.Errorf("pickBand(%d, %d) = %d, %d, %v; want %d, %d, %v", c.lo, c.hi, from, to, ok, c.from, c.to, c.ok)
		}
	}
}

// TestFreePortOutsideEphemeralRange: picked ports are free and never in the
// range the kernel gives outgoing connections, the machine's own range and
// another one.
func TestFreePortOutsideEphemeralRange(t *testing.T) {
	check := func() {
		t.Helper()
		lo, hi := ephemeralRange()
		for range 50 {
			p, err := FreePort("127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			if p >= lo && p <= hi {
				t.Fatalf("picked %d, inside the ephemeral range %d-%d", p, lo, hi)
			}
			if p < minPickedPort {
				t.Fatalf("picked %d, below %d", p, minPickedPort)
			}
			if err := portFree("127.0.0.1", p); err != nil {
				t.Fatalf("picked %d, not free: %v", p, err)
			}
		}
	}
	check()
	f := filepath.Join(t.TempDir(), "range")
	if err := os.WriteFile(f, []byte("15000\t64000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := ephemeralRangeFile
	ephemeralRangeFile = f
	t.Cleanup(func() { ephemeralRangeFile = old })
	if lo, hi := ephemeralRange(); lo != 15000 || hi != 64000 {
		t.Fatalf("range read as %d-%d", lo, hi)
	}
	check()
}

// TestTemporalPortsKeptAcrossRestarts: the internal ports picked on first
// start are written to PortsFile, outside the ephemeral range, and bound
// again on the next start; one held by another listener by then is replaced
// by a new pick (and the file updated), and the server serves.
func TestTemporalPortsKeptAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	opts := TemporalOptions{DatabaseFile: filepath.Join(dir, "temporal.db"), Namespaces: []string{"default"},
		PortsFile: filepath.Join(dir, "temporal-ports.json")}
	start := func() {
		t.Helper()
		srv, err := StartTemporal(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address, Namespace: "default"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	kept := func() internalPorts {
		t.Helper()
		p, err := readPorts(opts.PortsFile)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	start()
	first := kept()
	lo, hi := ephemeralRange()
	seen := map[int]bool{}
	for _, svc := range internalServices {
		p := first[svc]
		if p == 0 || seen[p] || (p >= lo && p <= hi) {
			t.Fatalf("kept ports %v: want four distinct ones outside %d-%d", first, lo, hi)
		}
		seen[p] = true
	}

	start()
	if again := kept(); !maps.Equal(again, first) {
		t.Fatalf("restart kept %v, want %v again", again, first)
	}

	held, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(first["worker"]))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	start()
	third := kept()
	if third["worker"] == first["worker"] || third["worker"] == 0 {
		t.Fatalf("worker port %d is held elsewhere, yet kept: %v", first["worker"], third)
	}
	for _, svc := range []string{"frontend-http", "history", "matching"} {
		if third[svc] != first[svc] {
			t.Errorf("%s moved from %d to %d though its port was free", svc, first[svc], third[svc])
		}
	}
}

// TestTemporalRequestedPortTaken: a frontend port asked for and held by
// another listener is one readable error, not Temporal exiting the process.
func TestTemporalRequestedPortTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port
	_, err = StartTemporal(TemporalOptions{DatabaseFile: filepath.Join(t.TempDir(), "temporal.db"), FrontendPort: port})
	want := "temporal frontend: 127.0.0.1:" + strconv.Itoa(port) + " is already in use by another process"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}
