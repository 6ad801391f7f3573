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

// SDKCopy is where a plugin project keeps its own copy of the
// AssemblyScript SDK (`trainyard plugin init` writes it there).
const SDKCopy = "third_party/trainyard-sdk-as"

// Dir builds the plugin project in dir into out: an AssemblyScript project
// when dir/assembly/index.ts exists, else the Go main package in dir (built
// in dir, so a project with its own go.mod builds with its own module
// graph). asSDK is the AssemblyScript SDK; "" means the project's own copy
// (SDKCopy) or else sdk/assemblyscript. The compiler is the SDK's
// node_modules/.bin/asc or else the project's, which `npm ci` installs from
// the project's package-lock.json when it is missing.
func Dir(ctx context.Context, dir, asSDK, out string) error {
	entry := filepath.Join(dir, "assembly", "index.ts")
	if _, err := os.Stat(entry); err != nil {
		return goBuild(ctx, "", dir, ".", dir, out)
	}
	if asSDK == "" {
		asSDK = "sdk/assemblyscript"
		if own := filepath.Join(dir, SDKCopy); exists(filepath.Join(own, "assembly", "index.ts")) {
			asSDK = own
		}
	}
	asc := filepath.Join(asSDK, "node_modules", ".bin", "asc")
	if exists(asc) || !exists(filepath.Join(dir, "package.json")) {
		return assemblyScript(ctx, asc, asSDK, "assembly/index/abortTrap", entry, out)
	}
	// The project's own compiler names elements relative to the project.
	asc = filepath.Join(dir, "node_modules", ".bin", "asc")
	if !exists(asc) {
		npm := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefer-offline")
		if exists(filepath.Join(dir, "package-lock.json")) {
			npm.Args[1] = "ci"
		}
		npm.Dir = dir
		if err := run(npm, entry+" (npm "+npm.Args[1]+" in "+dir+")"); err != nil {
			return err
		}
	}
	rel, err := filepath.Rel(dir, asSDK)
	if err != nil {
		return fmt.Errorf("build plugin %s: %w", entry, err)
	}
	return assemblyScript(ctx, asc, dir, filepath.ToSlash(rel)+"/assembly/index/abortTrap", entry, out)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Go builds the Go plugin package pkg (an import path or a ./relative
// directory, resolved in dir) into out with
// GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared.
// goBin "" means "go" from PATH.
func Go(ctx context.Context, goBin, dir, pkg, out string) error {
	return goBuild(ctx, goBin, dir, pkg, pkg, out)
}

func goBuild(ctx context.Context, goBin, dir, pkg, what, out string) error {
	if goBin == "" {
		var err error
		if goBin, err = exec.LookPath("go"); err != nil {
			return fmt.Errorf("build plugin %s: the go command is not on PATH: %w", what, err)
		}
	}
	var err error
	if out, err = filepath.Abs(out); err != nil { // go build runs in dir
		return fmt.Errorf("build plugin %s: %w", what, err)
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	return run(cmd, what)
}

// AssemblyScript compiles the entry file with asc (the SDK's
// node_modules/.bin/asc) into out, with the flags the SDK requires: the
// incremental runtime and an abort that traps, so the module imports nothing.
// sdkDir is sdk/assemblyscript.
func AssemblyScript(ctx context.Context, sdkDir, entry, out string) error {
	return assemblyScript(ctx, filepath.Join(sdkDir, "node_modules", ".bin", "asc"), sdkDir, "assembly/index/abortTrap", entry, out)
}

// assemblyScript runs asc in dir; abort names the SDK's abortTrap as asc
// names elements: by path relative to the package asc runs in (the SDK's,
// or a project's with its own node_modules).
func assemblyScript(ctx context.Context, asc, dir, abort, entry, out string) error {
	if _, err := os.Stat(asc); err != nil {
		return fmt.Errorf("build plugin %s: AssemblyScript compiler missing (%v): run `npm ci` in %s or `make plugins`", entry, err, dir)
	}
	var err error
	for _, p := range []*string{&entry, &out, &asc} {
		if *p, err = filepath.Abs(*p); err != nil {
			return fmt.Errorf("build plugin %s: %w", entry, err)
		}
	}
	cmd := exec.CommandContext(ctx, asc, entry, "-o", out,
		"--runtime", "incremental", "-O3", "--noAssert", "--use", "abort="+abort)
	cmd.Dir = dir
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
