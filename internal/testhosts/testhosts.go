// Package testhosts makes hosts for tests on this one machine: each host is
// a network namespace with a veth pair to a bridge in the root namespace,
// addressed from 198.18.0.0/15 (RFC 2544's benchmarking range; assigned
// only inside namespaces a test makes), so processes started in it (agents,
// sshd, trainers) reach the control plane and each other only over that
// link. Faults are nftables rules inside the host's namespace: a partition
// from the control plane or from one peer (both ways: a silent drop, like a
// cut cable, not a refusal), and random loss on the whole link. Delay is a
// relay in the test's process (delay.go): this kernel has no netem.
//
// It needs root (CAP_NET_ADMIN), iproute2 and nftables (`make test`
// installs them). Where it cannot make namespaces, Require skips the test,
// or fails it under CI=true. Everything a Net made is removed when its test
// ends; what a crashed run left (named after a pid no longer alive) is
// removed by the next New.
package testhosts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// Range is where test hosts' addresses come from: each Net takes one /24.
var Range = netip.MustParsePrefix("198.18.0.0/15")

// Net is a bridge in the root namespace and the hosts on it.
type Net struct {
	t       testing.TB
	name    string       // "ty<pid><letter>": the bridge, and every name below it
	Gateway netip.Addr   // the root namespace's address on the bridge
	Subnet  netip.Prefix // the Net's /24

	mu    sync.Mutex
	hosts []*Host
}

// Host is one namespace on a Net.
type Host struct {
	Name string
	NS   string     // network namespace name
	Addr netip.Addr // its address on the Net
	net  *Net
	link string // its veth's end in the root namespace

	mu     sync.Mutex
	faults []string   // nftables rules in force, for Heal
	delay  *delayLink // the relay Delay put on its link
}

var (
	nets    atomic.Int32
	nameRE  = regexp.MustCompile(`^ty([0-9]+)[a-z]`)
	sweepMu sync.Mutex
)

// Require skips t where test hosts cannot be made (not root, no ip or nft),
// and fails it when CI=true: CI runs as root with both installed.
func Require(t testing.TB) {
	t.Helper()
	var why string
	switch {
	case os.Geteuid() != 0:
		why = "test hosts need root (network namespaces)"
	default:
		for _, tool := range []string{"ip", "nft"} {
			if _, err := exec.LookPath(tool); err != nil {
				why = fmt.Sprintf("test hosts need %s (make test installs iproute2 and nftables)", tool)
				break
			}
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// New makes a Net for t and removes it when t ends.
func New(t testing.TB) *Net {
	t.Helper()
	Require(t)
	sweep(t)
	n := &Net{t: t, name: fmt.Sprintf("ty%d%c", os.Getpid(), 'a'+rune(nets.Add(1)-1)%26)}
	sub, err := freeSubnet()
	if err != nil {
		t.Fatal(err)
	}
	n.Subnet = sub
	n.Gateway = sub.Addr().Next()
	t.Cleanup(n.close)
	n.ip("link", "add", n.name, "type", "bridge")
	// A bridge takes the lowest address of its ports unless it has one of
	// its own; Delay adds and removes a port, and hosts would keep sending
	// to a gateway address that is gone until their ARP entries expire.
	mac, err := os.ReadFile("/sys/class/net/" + n.name + "/address")
	if err != nil {
		t.Fatal(err)
	}
	n.ip("link", "set", n.name, "address", strings.TrimSpace(string(mac)))
	n.ip("addr", "add", netip.PrefixFrom(n.Gateway, 24).String(), "dev", n.name)
	n.ip("link", "set", n.name, "up")
	return n
}

// Host makes a host named name (its namespace is <net>-<name>) at the
// Net's next address. It has no default route: it reaches the gateway and
// its peers, and anything else (a DNS server in resolv.conf) fails at once
// as unreachable rather than timing out, and never leaves this machine.
func (n *Net) Host(name string) *Host {
	n.t.Helper()
	n.mu.Lock()
	i := len(n.hosts)
	addr := n.Gateway
	for range i + 1 {
		addr = addr.Next()
	}
	veth := fmt.Sprintf("%s%d", n.name, i)
	h := &Host{Name: name, NS: n.name + "-" + name, Addr: addr, net: n, link: veth}
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()
	n.ip("netns", "add", h.NS)
	n.ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.NS)
	n.ip("link", "set", veth, "master", n.name, "up")
	n.ip("-n", h.NS, "addr", "add", netip.PrefixFrom(addr, 24).String(), "dev", "eth0")
	n.ip("-n", h.NS, "link", "set", "eth0", "up")
	n.ip("-n", h.NS, "link", "set", "lo", "up")
	return h
}

// Command is name with args run inside h (ip netns exec): its network is
// the host's; its files, users and processes are this machine's.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// PartitionFrom cuts h off from each peer address, both ways, until Heal:
// packets are dropped silently, so connections hang as over a cut cable.
// The gateway is the control plane's side.
func (h *Host) PartitionFrom(peers ...netip.Addr) {
	h.net.t.Helper()
	for _, p := range peers {
		h.rule("input ip saddr " + p.String() + " drop")
		h.rule("output ip daddr " + p.String() + " drop")
	}
}

// PartitionFromService cuts h off from one service, both ways, until Heal:
// TCP to and from svc is dropped, everything else at its address passes
// (dev's S3 and Temporal share one).
func (h *Host) PartitionFromService(svc netip.AddrPort) {
	h.net.t.Helper()
	h.rule(fmt.Sprintf("input ip saddr %s tcp sport %d drop", svc.Addr(), svc.Port()))
	h.rule(fmt.Sprintf("output ip daddr %s tcp dport %d drop", svc.Addr(), svc.Port()))
}

// Loss drops pct percent of h's packets each way, at random, until Heal.
func (h *Host) Loss(pct int) {
	h.net.t.Helper()
	match := fmt.Sprintf("numgen random mod 100 < %d drop", pct)
	if pct >= 100 {
		match = "drop"
	}
	h.rule("input " + match)
	h.rule("output " + match)
}

// Heal removes every fault of h.
func (h *Host) Heal() {
	h.net.t.Helper()
	h.mu.Lock()
	had := len(h.faults) > 0
	h.faults = nil
	h.mu.Unlock()
	if had {
		h.nft("delete", "table", "inet", "testhosts")
	}
	if h.stopDelay() {
		h.net.ip("link", "set", h.link, "promisc", "off", "master", h.net.name)
	}
}

// rule adds "CHAIN MATCH..." to the host's nftables table, creating it and
// its input and output chains on first use.
func (h *Host) rule(r string) {
	h.mu.Lock()
	first := len(h.faults) == 0
	h.faults = append(h.faults, r)
	h.mu.Unlock()
	if first {
		h.nft("add", "table", "inet", "testhosts")
		h.nft("add", "chain", "inet", "testhosts", "input", "{ type filter hook input priority 0; }")
		h.nft("add", "chain", "inet", "testhosts", "output", "{ type filter hook output priority 0; }")
	}
	chain, match, _ := strings.Cut(r, " ")
	h.nft(append([]string{"add", "rule", "inet", "testhosts", chain}, strings.Fields(match)...)...)
}

func (h *Host) nft(args ...string) {
	h.net.t.Helper()
	h.net.ip(append([]string{"netns", "exec", h.NS, "nft"}, args...)...)
}

func (n *Net) ip(args ...string) {
	n.t.Helper()
	if _, err := run(args...); err != nil {
		n.t.Fatalf("test hosts: %v", err)
	}
}

// close stops every process left in the Net's hosts and removes them and
// the bridge.
func (n *Net) close() {
	n.mu.Lock()
	hosts := n.hosts
	n.mu.Unlock()
	for _, h := range hosts {
		h.stopDelay()
		removeNS(h.NS)
	}
	_, _ = run("link", "del", n.name)
}

func run(args ...string) (string, error) {
	cmd := exec.Command("ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

func removeNS(ns string) {
	if out, err := run("netns", "pids", ns); err == nil {
		for _, f := range strings.Fields(out) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_, _ = run("netns", "del", ns)
}

// sweep removes namespaces and links of Nets whose process is gone (a
// crashed or killed test run).
func sweep(t testing.TB) {
	sweepMu.Lock()
	defer sweepMu.Unlock()
	dead := func(name string) bool {
		m := nameRE.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, _ := strconv.Atoi(m[1])
		return pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH
	}
	if out, err := run("netns", "list"); err == nil {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && dead(f[0]) {
				t.Logf("test hosts: removing namespace %s of a run that is gone", f[0])
				removeNS(f[0])
			}
		}
	}
	if out, err := run("-o", "link", "show"); err == nil {
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if dead(name) {
				t.Logf("test hosts: removing link %s of a run that is gone", name)
				_, _ = run("link", "del", name)
			}
		}
	}
}

// freeSubnet is a /24 of Range that no address of this machine's root
// namespace is in, picked from the pid so parallel test processes differ.
func freeSubnet() (netip.Prefix, error) {
	out, err := run("-o", "-4", "addr", "show")
	if err != nil {
		return netip.Prefix{}, err
	}
	used := map[netip.Prefix]bool{}
	for _, f := range strings.Fields(out) {
		if p, err := netip.ParsePrefix(f); err == nil && Range.Contains(p.Addr()) {
			used[netip.PrefixFrom(p.Addr(), 24).Masked()] = true
		}
	}
	base := Range.Addr().As4()
	start := (os.Getpid()*7 + int(nets.Load())) % 512
	for k := range 512 {
		i := (start + k) % 512
		a := base
		a[1] += byte(i / 256)
		a[2] = byte(i % 256)
		p := netip.PrefixFrom(netip.AddrFrom4(a), 24)
		if !used[p] {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("test hosts: every /24 of 198.18.0.0/15 is in use")
}
