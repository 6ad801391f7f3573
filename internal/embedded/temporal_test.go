package embedded

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// TestStartTemporalPicksOtherPortsWhenOneIsTaken: a port picked free can be
// taken by another process before the server binds it (it happened on a
// busy test machine, and `trainyard dev` exited). The first HTTP port
// handed out here is one this test holds; the server is built again on
// other ports and serves.
func TestStartTemporalPicksOtherPortsWhenOneIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	freePort = func(ip string) (int, error) {
		calls++
		if calls == 1 { // the first attempt's frontend-http port
			return taken.Addr().(*net.TCPAddr).Port, nil
		}
		return FreePort(ip)
	}
	t.Cleanup(func() { freePort = FreePort })

	srv, err := StartTemporal(TemporalOptions{DatabaseFile: filepath.Join(t.TempDir(), "temporal.db"), Namespaces: []string{"default"}})
	if err != nil {
		t.Fatalf("start with a taken port: %v", err)
	}
	defer srv.Stop()
	if calls < 10 {
		t.Fatalf("ports picked %d times, want a second set of five", calls)
	}
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
