package training

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/trainyard/trainyard/internal/envserver"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
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
	wasm, err := r.module(ctx, sha)
	if err != nil {
		if errors.Is(err, pluginstore.ErrNotFound) {
			err = fmt.Errorf("%w: %w", ErrFatal, err)
		}
		return "", "", nil, err
	}
	load, closeAll := envserver.Modules(r.Plugins, func(context.Context, string) ([]byte, error) { return wasm, nil }, nil)
	mod, err := load(ctx, sha) // loaded now: a module that is no env fails the run here
	if err != nil {
		return "", "", nil, fmt.Errorf("%w: %w", ErrFatal, err)
	}
	md := mod.Metadata()
	label = md.Name + "@" + md.Version
	refs := map[string]bool{sha: true, md.Name: true, label: true}
	open := func(ctx context.Context, ref string) (*pluginhost.Module, error) {
		if !refs[ref] {
			return nil, fmt.Errorf("plugin %q is not granted to this run (it has %s)", ref, label)
		}
		return load(ctx, sha)
	}
	path = filepath.Join(runDir, "envs.sock")
	var tmp string
	if len(path) > 100 { // sun_path holds 107 bytes
		if tmp, err = os.MkdirTemp("", "trainyard-envs-"); err != nil {
			closeAll(context.WithoutCancel(ctx))
			return "", "", nil, err
		}
		path = filepath.Join(tmp, "envs.sock")
	}
	os.Remove(path) // a previous attempt's, on this node
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		closeAll(context.WithoutCancel(ctx))
		return "", "", nil, fmt.Errorf("env server: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&envserver.Server{Open: open}).Serve(sctx, ln)
	}()
	return path, label, func() {
		cancel()
		<-done
		closeAll(context.Background())
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}, nil
}
