package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/trainyard/trainyard/internal/atomicfile"
)

// Ports that `dev` picks itself (Temporal's internal services always; the
// frontend, S3 and UI when asked for port 0) are checked free and bound a
// moment later by a server that opens its own listener. A port out of the
// kernel's ephemeral range (net.ipv4.ip_local_port_range) can only be taken
// in between by a program that binds that very port; one inside it can be
// taken by any outgoing connection, and after a kill -9 of `dev` its
// agents reconnect in a burst of them (a restart failed with "bind:
// address already in use" on the worker service that way). So picks come
// from outside that range.

// ephemeralRangeFile is where Linux keeps the range; a test points it elsewhere.
var ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// ephemeralRange is the range of local ports the kernel hands to outgoing
// connections (and to listeners on port 0).
func ephemeralRange() (lo, hi int) {
	if b, err := os.ReadFile(ephemeralRangeFile); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && 0 < l && l <= h && h <= 65535 {
				return l, h
			}
		}
	}
	if runtime.GOOS == "linux" {
		return 32768, 60999
	}
	return 49152, 65535 // IANA's, which macOS and Windows use
}

// minPickedPort keeps picks clear of the low ports where well-known services
// (and Trainyard's own defaults: 7233, 8080, 8233, 9000) live.
const minPickedPort = 10000

// pickBand is where ports are picked: above the ephemeral range if that
// leaves room (typically 61000–65535: fixed service ports are rarely put
// there, and tests choose their fixed ports below 32768), else below it.
// ok is false when the ephemeral range leaves no room at all.
func pickBand(lo, hi int) (from, to int, ok bool) {
	const enough = 1000
	above, below := 65535-hi, lo-minPickedPort
	switch {
	case above >= enough:
		return hi + 1, 65535, true
	case below >= enough:
		return minPickedPort, lo - 1, true
	case above > 0 && above >= below:
		return hi + 1, 65535, true
	case below > 0:
		return minPickedPort, lo - 1, true
	}
	return 0, 0, false
}

// outsideEphemeral says whether port is one a pick may keep: outside the
// ephemeral range, or any port when that range leaves no room.
func outsideEphemeral(port int) bool {
	lo, hi := ephemeralRange()
	if _, _, ok := pickBand(lo, hi); !ok {
		return true
	}
	return port < lo || port > hi
}

// FreePort picks a TCP port on ip that no listener holds, outside the
// kernel's ephemeral range (see above). Where that range covers every port
// above 10000 the kernel picks one, as before.
func FreePort(ip string) (int, error) {
	from, to, ok := pickBand(ephemeralRange())
	if ok {
		for range 200 {
			p := from + rand.IntN(to-from+1)
			if portFree(ip, p) == nil {
				return p, nil
			}
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("find free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFree binds ip:port the way the servers will (Go's listeners set
// SO_REUSEADDR, so sockets of a killed process in TIME_WAIT do not count)
// and lets it go again. The error names the address.
func portFree(ip string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

// checkRequestedPort is for a port the user asked for: in use, it is an
// error that says so instead of a server's own (some exit the process).
func checkRequestedPort(what, ip string, port int) error {
	if err := portFree(ip, port); err != nil {
		if addressInUse(err) {
			return fmt.Errorf("%s: %s is already in use by another process", what, net.JoinHostPort(ip, strconv.Itoa(port)))
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// internalPorts are the embedded Temporal server's ports that nothing
// outside the process dials, by service: frontend-http, history, matching,
// worker. They are kept in TemporalOptions.PortsFile.
type internalPorts map[string]int

var internalServices = []string{"frontend-http", "history", "matching", "worker"}

func readPorts(file string) (internalPorts, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return internalPorts{}, nil
	}
	if err != nil {
		return internalPorts{}, err
	}
	var p internalPorts
	if err := json.Unmarshal(b, &p); err != nil {
		return internalPorts{}, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

func writePorts(file string, p internalPorts) error {
	b, _ := json.MarshalIndent(p, "", "  ")
	return atomicfile.Write(file, append(b, '\n'), 0o644)
}
