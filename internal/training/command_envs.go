package training

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/trainyard/trainyard/internal/envserver"
	"github.com/trainyard/trainyard/internal/pluginhost"
)

// A command trainer whose run names an env plugin finds its env server's
// socket in EnvSocket (the Python client, trainyard.envs, reads it) and
// the plugin's name@version in EnvPluginName.
const (
	EnvSocket     = envserver.SocketEnv
	EnvPluginName = "TRAINYARD_ENV"
)

// serveEnvs starts an env server for a command run's env plugin on a
// socket in runDir. It serves that plugin only (by its name, name@version
// or sha256) and grants it no capabilities. stop ends it.
func (r *Runner) serveEnvs(ctx context.Context, runDir, sha string) (path, label string, stop func(), err error) {
	mod, err := r.load(ctx, sha, pluginhost.Grants{})
	if err != nil {
		return "", "", nil, err
	}
	md := mod.Metadata()
	if md.Kind != pluginhost.KindEnv {
		mod.Close(context.WithoutCancel(ctx))
		return "", "", nil, fmt.Errorf("plugin %s is a %s plugin, not an env: %w", md.Label(), md.Kind, ErrFatal)
	}
	path = filepath.Join(runDir, "envs.sock")
	var tmp string
	if len(path) > 100 { // sun_path holds 107 bytes
		if tmp, err = os.MkdirTemp("", "trainyard-envs-"); err != nil {
			mod.Close(context.WithoutCancel(ctx))
			return "", "", nil, err
		}
		path = filepath.Join(tmp, "envs.sock")
	}
	os.Remove(path) // a previous attempt's, on this node
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		mod.Close(context.WithoutCancel(ctx))
		return "", "", nil, fmt.Errorf("env server: %w", err)
	}
	refs := map[string]bool{sha: true, md.Name: true, md.Name + "@" + md.Version: true}
	open := func(_ context.Context, ref string) (*pluginhost.Module, error) {
		if !refs[ref] {
			return nil, fmt.Errorf("plugin %q is not granted to this run (it has %s@%s)", ref, md.Name, md.Version)
		}
		return mod, nil
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&envserver.Server{Open: open}).Serve(sctx, ln)
	}()
	return path, md.Name + "@" + md.Version, func() {
		cancel()
		<-done
		mod.Close(context.Background())
		os.Remove(path)
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}, nil
}
