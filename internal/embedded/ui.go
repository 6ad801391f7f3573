package embedded

import (
	"fmt"
	"net"
	"strconv"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// UI is the Temporal Web UI, serving its bundled assets.
type UI struct {
	server *uiserver.Server
	URL    string
}

// StartUI serves the Web UI on ip:port (0 picks a free port, see FreePort),
// pointed at the Temporal frontend at temporalAddr. A port asked for that
// another process holds is an error that says so. The UI has no login of
// its own, so unless writeActions it refuses every write (terminate,
// signal, reset, start: 405 from the UI server itself, not just hidden
// buttons): work is changed through Trainyard's API, behind its tokens.
func StartUI(ip string, port int, temporalAddr string, writeActions bool) (*UI, error) {
	if port == 0 {
		p, err := FreePort(ip)
		if err != nil {
			return nil, err
		}
		port = p
	} else if err := checkRequestedPort("temporal ui", ip, port); err != nil {
		return nil, err
	}
	srv := uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                ip,
		Port:                port,
		TemporalGRPCAddress: temporalAddr,
		EnableUI:            true,
		DisableWriteActions: !writeActions,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		// No internet on our machines; the UI must not try to fetch news.
		DisableNewsFetch: true,
	}))
	// Start blocks; a failure to bind is fatal inside the UI server, so the
	// port was checked free just above.
	go func() { _ = srv.Start() }()
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	if err := waitTCP(addr); err != nil {
		return nil, fmt.Errorf("temporal ui: %w", err)
	}
	return &UI{server: srv, URL: "http://" + addr}, nil
}

// Stop closes the UI's listener.
func (u *UI) Stop() { u.server.Stop() }
