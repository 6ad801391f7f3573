// Package pluginbuild compiles plugin sources to WASM modules with the
// toolchains Trainyard supports: the Go toolchain (wasip1, c-shared) and
// AssemblyScript's asc. `trainyard plugin build` and the tests use it.
package pluginbuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Go builds the Go plugin package pkg (an import path or a ./relative
// directory, resolved in dir) into out with
// GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared.
// goBin "" means "go" from PATH.
func Go(ctx context.Context, goBin, dir, pkg, out string) error {
	if goBin == "" {
		var err error
		if goBin, err = exec.LookPath("go"); err != nil {
			return fmt.Errorf("build plugin %s: the go command is not on PATH: %w", pkg, err)
		}
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	return run(cmd, pkg)
}

// AssemblyScript compiles the entry file with asc (the SDK's
// node_modules/.bin/asc) into out, with the flags the SDK requires: the
// incremental runtime and an abort that traps, so the module imports nothing.
// sdkDir is sdk/assemblyscript.
func AssemblyScript(ctx context.Context, sdkDir, entry, out string) error {
	asc := filepath.Join(sdkDir, "node_modules", ".bin", "asc")
	if _, err := os.Stat(asc); err != nil {
		return fmt.Errorf("build plugin %s: AssemblyScript compiler missing (%v): run `npm ci` in %s or `make plugins`", entry, err, sdkDir)
	}
	// asc names elements by path relative to its working directory: run it
	// in the SDK so the abort handler is always assembly/index/abortTrap.
	var err error
	if entry, err = filepath.Abs(entry); err != nil {
		return fmt.Errorf("build plugin %s: %w", entry, err)
	}
	if out, err = filepath.Abs(out); err != nil {
		return fmt.Errorf("build plugin %s: %w", entry, err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join("node_modules", ".bin", "asc"), entry, "-o", out,
		"--runtime", "incremental", "-O3", "--noAssert", "--use", "abort=assembly/index/abortTrap")
	cmd.Dir = sdkDir
	return run(cmd, entry)
}

func run(cmd *exec.Cmd, what string) error {
	var outb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &outb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build plugin %s: %w\n%s", what, err, bytes.TrimSpace(outb.Bytes()))
	}
	return nil
}
