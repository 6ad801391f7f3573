package testhosts

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHosts: two hosts reach the root namespace's listener and each other;
// a partition from the gateway cuts one off both ways and leaves its peer
// link alone; a partition from one peer, the other way round; Heal
// restores both; loss drops some packets; a Net's namespaces and bridge are
// gone after it; what a dead run left is swept.
func TestHosts(t *testing.T) {
	n := New(t)
	a, b := n.Host("a"), n.Host("b")
	if !n.Subnet.Contains(a.Addr) || !Range.Contains(n.Gateway) || a.Addr == b.Addr {
		t.Fatalf("addresses: net %v gateway %v, a %v, b %v", n.Subnet, n.Gateway, a.Addr, b.Addr)
	}

	// An HTTP server on the gateway (the control plane's side) and one in b.
	ln, err := net.Listen("tcp", n.Gateway.String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB: many GSO segments
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" { // echoes a body of 4 MiB back
			if b, _ := io.ReadAll(r.Body); !bytes.Equal(b, big) {
				http.Error(w, "body differs", http.StatusBadRequest)
				return
			}
			w.Write(big)
			return
		}
		fmt.Fprint(w, "ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	gw := "http://" + ln.Addr().String() + "/"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	peer := b.Command(ctx, "/usr/bin/python3", "-m", "http.server", "8000", "--bind", b.Addr.String())
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	bURL := "http://" + b.Addr.String() + ":8000/"

	reach := func(h *Host, url string) bool {
		t.Helper()
		out, _ := h.Command(ctx, "curl", "-s", "-m", "1", "-o", "/dev/null", "-w", "%{http_code}", url).Output()
		return string(out) == "200"
	}
	waitReach := func(h *Host, url string) {
		t.Helper()
		for i := 0; !reach(h, url); i++ {
			if i == 50 {
				t.Fatalf("%s cannot reach %s", h.Name, url)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitReach(a, gw)
	waitReach(a, bURL)

	a.PartitionFrom(n.Gateway)
	if reach(a, gw) {
		t.Error("a reaches the gateway through a partition")
	}
	if !reach(a, bURL) {
		t.Error("a partitioned from the gateway lost its peer too")
	}
	// Both ways: the root namespace cannot reach a's listener either.
	aSrv := a.Command(ctx, "/usr/bin/python3", "-m", "http.server", "8001", "--bind", a.Addr.String())
	if err := aSrv.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if out, _ := exec.CommandContext(ctx, "curl", "-s", "-m", "1", "-o", "/dev/null", "-w", "%{http_code}", "http://"+a.Addr.String()+":8001/").Output(); string(out) == "200" {
		t.Error("the root namespace reaches a through its partition")
	}
	a.Heal()
	waitReach(a, gw)

	a.PartitionFrom(b.Addr)
	if reach(a, bURL) || !reach(a, gw) {
		t.Error("a partition from b: want b cut off and the gateway reachable")
	}
	a.Heal()
	waitReach(a, bURL)

	// One service of the gateway's: its other ports still answer.
	ln2, err := net.Listen("tcp", n.Gateway.String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln2)
	gw2 := "http://" + ln2.Addr().String() + "/"
	a.PartitionFromService(netip.MustParseAddrPort(ln.Addr().String()))
	if reach(a, gw) || !reach(a, gw2) {
		t.Errorf("a partitioned from %s: want it cut off and %s reachable", gw, gw2)
	}
	a.Heal()
	waitReach(a, gw)

	a.Loss(100)
	if reach(a, gw) {
		t.Error("a reaches the gateway at 100% loss")
	}
	a.Heal()
	waitReach(a, gw)

	// Delay: a TCP handshake from a takes at least the delay; 4 MiB go up
	// and come back whole; b is still reachable; Heal puts the link back.
	const d = 200 * time.Millisecond
	a.Delay(d)
	body := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(body, big, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := a.Command(ctx, "curl", "-s", "-m", "30", "--data-binary", "@"+body, "-o", "/dev/null",
		"-w", "%{http_code} %{size_download} %{time_connect}", gw+"big").Output()
	var code, size int
	var connect float64
	if _, serr := fmt.Sscan(string(out), &code, &size, &connect); serr != nil || err != nil {
		t.Fatalf("4 MiB through a delayed link: %q, %v", out, err)
	}
	if code != 200 || size != len(big) {
		t.Errorf("4 MiB through a delayed link: status %d, %d bytes back", code, size)
	}
	if time.Duration(connect*float64(time.Second)) < d {
		t.Errorf("a TCP handshake through a %v delay took %.3fs", d, connect)
	}
	if !reach(a, bURL) {
		t.Error("a delayed cannot reach b")
	}
	a.Heal()
	if _, err := run("link", "show", a.link+"r"); err == nil {
		t.Error("the delay's relay link is left after Heal")
	}
	waitReach(a, gw)
}

func TestCloseAndSweep(t *testing.T) {
	var ns, bridge string
	t.Run("net", func(t *testing.T) {
		n := New(t)
		ns, bridge = n.Host("x").NS, n.name
	})
	if out, _ := run("netns", "list"); strings.Contains(out, ns) {
		t.Errorf("namespace %s left after its test", ns)
	}
	if _, err := run("link", "show", bridge); err == nil {
		t.Errorf("bridge %s left after its test", bridge)
	}

	// A namespace and a bridge named after a pid that is gone.
	gone := "ty4194303z"
	if _, err := run("netns", "add", gone+"-h"); err != nil {
		t.Fatal(err)
	}
	if _, err := run("link", "add", gone, "type", "bridge"); err != nil {
		t.Fatal(err)
	}
	New(t)
	if out, _ := run("netns", "list"); strings.Contains(out, gone) {
		t.Errorf("namespace %s-h of a dead run not swept", gone)
	}
	if _, err := run("link", "show", gone); err == nil {
		t.Errorf("bridge %s of a dead run not swept", gone)
	}
}
