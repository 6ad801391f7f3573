package testhosts

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// delayLink holds back every frame a host sends by a fixed time. This
// kernel has neither netem nor fq, so no qdisc can; instead the host's
// root-side veth leaves the bridge and a relay in this process copies
// frames between it and a second veth pair whose other end is on the
// bridge. The relay's packet sockets carry a virtio-net header, so GSO
// segments and partial checksums pass through as the kernel made them and
// nothing is parsed here.
type delayLink struct {
	host, relay *os.File // packet sockets on the host's veth and on the relay's
	wg          sync.WaitGroup
}

// frameMax holds a whole GSO segment (64 KiB) and its virtio-net header.
const frameMax = 1 << 17

// Delay holds back every packet h sends by d until Heal, as `tc qdisc add
// dev eth0 root netem delay d` inside h would: round trips to and from h
// take d longer. It stacks with Loss.
func (h *Host) Delay(d time.Duration) {
	h.net.t.Helper()
	h.mu.Lock()
	if h.delay != nil {
		h.mu.Unlock()
		h.net.t.Fatalf("test hosts: %s already has a delay", h.Name)
	}
	h.mu.Unlock()
	n := h.net
	relay, bridgeSide := h.link+"r", h.link+"b"
	n.ip("link", "add", relay, "type", "veth", "peer", "name", bridgeSide)
	n.ip("link", "set", bridgeSide, "master", n.name, "up")
	n.ip("link", "set", relay, "promisc", "on", "up")
	n.ip("link", "set", h.link, "nomaster")
	n.ip("link", "set", h.link, "promisc", "on")
	dl := &delayLink{}
	var err error
	if dl.host, err = packetSocket(h.link); err == nil {
		dl.relay, err = packetSocket(relay)
	}
	if err != nil {
		h.net.t.Fatalf("test hosts: delay on %s: %v", h.Name, err)
	}
	type frame struct {
		due time.Time
		b   []byte
	}
	held := make(chan frame, 8192)
	dl.wg.Add(3)
	go func() { // what h sends: held back d
		defer dl.wg.Done()
		defer close(held)
		buf := make([]byte, frameMax)
		for {
			k, err := dl.host.Read(buf)
			if err != nil {
				return
			}
			select {
			case held <- frame{time.Now().Add(d), append([]byte(nil), buf[:k]...)}:
			default: // a full queue drops, as a router's would
			}
		}
	}()
	go func() {
		defer dl.wg.Done()
		for f := range held {
			time.Sleep(time.Until(f.due))
			_, _ = dl.relay.Write(f.b)
		}
	}()
	go func() { // what h receives: at once
		defer dl.wg.Done()
		buf := make([]byte, frameMax)
		for {
			k, err := dl.relay.Read(buf)
			if err != nil {
				return
			}
			_, _ = dl.host.Write(buf[:k])
		}
	}()
	h.mu.Lock()
	h.delay = dl
	h.mu.Unlock()
}

// stopDelay ends h's relay and removes its veth pair; it reports whether
// there was one.
func (h *Host) stopDelay() bool {
	h.mu.Lock()
	dl := h.delay
	h.delay = nil
	h.mu.Unlock()
	if dl == nil {
		return false
	}
	dl.host.Close()
	dl.relay.Close()
	dl.wg.Wait()
	_, _ = run("link", "del", h.link+"r")
	return true
}

// packetSocket is a raw packet socket bound to ifname that sees only what
// arrives on it (not what it sends), each frame prefixed by its virtio-net
// header, read and written through Go's poller so Close ends a Read.
func packetSocket(ifname string) (*os.File, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	for _, o := range []int{unix.PACKET_VNET_HDR, unix.PACKET_IGNORE_OUTGOING} {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, o, 1); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("packet socket option %d: %w", o, err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind packet socket to %s: %w", ifname, err)
	}
	return os.NewFile(uintptr(fd), ifname), nil
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
