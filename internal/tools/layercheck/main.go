// Command layercheck fails when an import crosses the repository's floors
// (README, Layout), as `make lint` runs it:
//
//	go run ./internal/tools/layercheck [MODULE_DIR...]
//
// sdk/ (the guest SDKs) and policies/ (the Rego, embedded) are the lowest
// floor: each imports nothing of ours but itself. plugins/ (the shipped
// plugins' sources) builds on sdk/ only. internal/ may import sdk/ and
// policies/ but nothing above them (plugins/, api/, workflows/, cmd/), so the plugin
// host never depends on the plugins it runs. Tests under internal/ may
// still drive what lies above (the e2e suite starts the API, a capability
// test asks plugins/arithmetic/problem for the right answer); tests under
// sdk/ and plugins/ may not reach into internal/.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Module is the root module's path; the Go SDK module lies under it.
const Module = "github.com/trainyard/trainyard"

func main() {
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	bad := 0
	for _, dir := range dirs {
		pkgs, err := list(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "layercheck:", err)
			os.Exit(2)
		}
		for _, p := range pkgs {
			for _, v := range Violations(p) {
				fmt.Println("layercheck:", v)
				bad++
			}
		}
	}
	if bad > 0 {
		fmt.Printf("layercheck: %d import(s) cross a floor (sdk/ ← plugins/; sdk/, policies/ ← internal/ ← api/, workflows/, cmd/)\n", bad)
		os.Exit(1)
	}
}

// Package is one package's own and test imports.
type Package struct {
	Path        string
	Imports     []string
	TestImports []string // imports of _test.go files, in-package and external
}

// list runs `go list` on every package of the module in dir.
func list(dir string) ([]Package, error) {
	cmd := exec.Command("go", "list", "-e", "-f",
		"{{.ImportPath}}|{{join .Imports \" \"}}|{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %v: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []Package
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) != 3 {
			continue
		}
		pkgs = append(pkgs, Package{Path: f[0], Imports: strings.Fields(f[1]), TestImports: strings.Fields(f[2])})
	}
	return pkgs, sc.Err()
}

// Violations lists the imports of p that cross a floor, as readable lines.
func Violations(p Package) []string {
	from := floor(p.Path)
	var out []string
	check := func(imp string, test bool) {
		to := floor(imp)
		if to == "" || allowed(from, to, test) {
			return
		}
		kind := "imports"
		if test {
			kind = "imports (in a test)"
		}
		out = append(out, fmt.Sprintf("%s %s %s", strings.TrimPrefix(p.Path, Module+"/"), kind, strings.TrimPrefix(imp, Module+"/")))
	}
	for _, imp := range p.Imports {
		check(imp, false)
	}
	for _, imp := range p.TestImports {
		check(imp, true)
	}
	return out
}

// floor is the top-level folder of one of our packages ("sdk", "plugins",
// "internal", "api", ...), "" for a package that is not ours.
func floor(path string) string {
	rest, ok := strings.CutPrefix(path, Module+"/")
	if !ok {
		return ""
	}
	top, _, _ := strings.Cut(rest, "/")
	return top
}

func allowed(from, to string, test bool) bool {
	switch from {
	case "sdk", "policies":
		return to == from
	case "plugins":
		return to == "sdk" || to == "plugins"
	case "internal":
		return to == "sdk" || to == "policies" || to == "internal" || test
	case "workflows": // data flows cmd → api → workflows: never back up
		return to != "api" && to != "cmd"
	case "api":
		return to != "cmd"
	default: // cmd, and the top-level folders below it: everything of ours
		return true
	}
}
