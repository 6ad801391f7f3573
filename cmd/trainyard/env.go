package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/envserver"
	"github.com/trainyard/trainyard/internal/pluginhost"
)

func newEnvCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "env", Short: "Env plugins for your own trainer: a local env server"}
	cf := &clientFlags{}
	var socket string
	var allow []string
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve env plugins as vectorised envs on a Unix socket (the Python client's trainyard.envs.make)",
		Long: "serve hosts env plugins in their WebAssembly sandbox for trainers on this machine: each client\n" +
			"opens N instances of a plugin and steps them through buffers shared with this process. Plugins\n" +
			"are .wasm files, uploaded plugins (with a server configured) or built-in ones; --plugin limits\n" +
			"what is served. The socket defaults to $TRAINYARD_ENV_SOCKET, else $XDG_RUNTIME_DIR/trainyard-envs.sock,\n" +
			"else /tmp/trainyard-envs-UID.sock: where the Python client looks.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log, err := g.logger()
			if err != nil {
				return err
			}
			path := socket
			if path == "" {
				path = defaultEnvSocket()
			}
			ln, err := listenUnix(path)
			if err != nil {
				return err
			}
			defer ln.Close()
			rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{})
			if err != nil {
				return err
			}
			defer rt.Close(context.Background())
			open, closeAll := envserver.Modules(rt, func(ctx context.Context, ref string) ([]byte, error) { return pluginModule(ctx, cf, ref) }, allow)
			defer closeAll(context.Background())
			fmt.Fprintf(cmd.OutOrStdout(), "serving env plugins on %s (export %s=%s)\n", path, envserver.SocketEnv, path)
			return (&envserver.Server{Open: open, Log: log}).Serve(ctx, ln)
		},
	}
	addClientFlags(serve, cf)
	serve.Flags().StringVar(&socket, "socket", "", "Unix socket to serve on")
	serve.Flags().StringSliceVar(&allow, "plugin", nil, "serve only these plugins (repeatable; default: any the server can find)")
	cmd.AddCommand(serve)
	return cmd
}

// defaultEnvSocket is where the Python client looks first
// (sdk/python/trainyard/envs.py: default_socket).
func defaultEnvSocket() string {
	if p := os.Getenv(envserver.SocketEnv); p != "" {
		return p
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return filepath.Join(d, "trainyard-envs.sock")
		}
	}
	return fmt.Sprintf("/tmp/trainyard-envs-%d.sock", os.Getuid())
}

// listenUnix listens on path, replacing a stale socket file that nobody
// answers on (left by a killed server) but not a live one.
func listenUnix(path string) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		return ln, err
	}
	if c, derr := net.Dial("unix", path); derr == nil {
		c.Close()
		return nil, fmt.Errorf("an env server already answers on %s", path)
	}
	if st, serr := os.Lstat(path); serr != nil || st.Mode().Type() != os.ModeSocket {
		return nil, fmt.Errorf("listen on %s: %w (not a socket: left alone)", path, err)
	}
	if err := os.Remove(path); err != nil {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
}
