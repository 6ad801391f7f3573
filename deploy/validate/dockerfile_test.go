package validate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/opencontainers/go-digest"
)

// offlineImages answers BuildKit's base-image look-ups without a registry
// (none is reachable here): every base is a plain Linux image with the
// usual PATH. It records what was asked for.
type offlineImages struct{ refs []string }

func (o *offlineImages) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	o.refs = append(o.refs, ref)
	cfg := `{"architecture":"amd64","os":"linux",
	  "config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
	  "rootfs":{"type":"layers","diff_ids":["sha256:` + strings.Repeat("0", 64) + `"]}}`
	return ref, "", []byte(cfg), nil
}

// lint runs BuildKit's build checks (what `docker build --check` runs) over
// every stage, and returns the warnings and the build error, if any.
func lint(t *testing.T, dt []byte) ([]string, *offlineImages) {
	t.Helper()
	ctx := context.Background()
	res := &offlineImages{}
	// The source map names the Dockerfile in results, as the frontend's does.
	src := llb.Local("dockerfile")
	sm := llb.NewSourceMap(&src, "Dockerfile", "Dockerfile", dt)
	def, err := src.Marshal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sm.Definition = def
	out, err := dockerfile2llb.DockerfileLint(ctx, dt, dockerfile2llb.ConvertOpt{MetaResolver: res, SourceMap: sm})
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, w := range out.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		problems = append(problems, fmt.Sprintf("line %d: %s: %s", line, w.RuleName, w.Detail))
	}
	if out.Error != nil {
		problems = append(problems, "build error: "+out.Error.Message)
	}
	return problems, res
}

func TestDockerfileBuildChecks(t *testing.T) {
	dt, err := os.ReadFile(repo("deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	problems, images := lint(t, dt)
	for _, p := range problems {
		t.Error(p)
	}
	goVersion := goDirective(t)
	want := []string{
		"docker.io/library/golang:" + goVersion + "-bookworm",
		"docker.io/library/debian:bookworm-slim",
		"gcr.io/distroless/static-debian12:nonroot",
	}
	got := strings.Join(images.refs, " ")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("base images %q lack %s (the build stage must match go.mod's go %s)", images.refs, w, goVersion)
		}
	}
}

// The checks can fail: a Dockerfile with known faults is reported.
func TestDockerfileBuildChecksCatch(t *testing.T) {
	bad := "# check=error=false\nFROM debian:bookworm-slim as Build\nENV KEY=$UNDEFINED\nENTRYPOINT trainyard server\n"
	problems, _ := lint(t, []byte(bad))
	all := strings.Join(problems, "\n")
	for _, rule := range []string{"FromAsCasing", "StageNameCasing", "UndefinedVar", "JSONArgsRecommended"} {
		if !strings.Contains(all, rule) {
			t.Errorf("no %s in %q", rule, problems)
		}
	}
}

func goDirective(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(repo("go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

// The images' shape: the targets deploy/README.md, the Kubernetes overlays
// and compose.yaml build, trainyard as exec-form entrypoint, non-root.
func TestDockerfileStages(t *testing.T) {
	dt, err := os.ReadFile(repo("deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	ast, err := parser.Parse(bytes.NewReader(dt))
	if err != nil {
		t.Fatal(err)
	}
	stages, _, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]instructions.Stage{}
	for _, s := range stages {
		byName[s.Name] = s
	}
	if last := stages[len(stages)-1].Name; last != "control" {
		t.Errorf("default (last) stage is %q, want control", last)
	}
	for _, name := range []string{"agent", "control"} {
		s, ok := byName[name]
		if !ok {
			t.Errorf("no stage %q", name)
			continue
		}
		var entry []string
		user := ""
		for _, c := range s.Commands {
			switch c := c.(type) {
			case *instructions.EntrypointCommand:
				if c.PrependShell {
					t.Errorf("%s: ENTRYPOINT in shell form: signals would go to /bin/sh", name)
				}
				entry = c.CmdLine
			case *instructions.UserCommand:
				user = c.User
			}
		}
		if len(entry) == 0 || filepath.Base(entry[len(entry)-1]) != "trainyard" {
			t.Errorf("%s: ENTRYPOINT %q does not end in trainyard", name, entry)
		}
		if uid, _, _ := strings.Cut(user, ":"); user == "" || uid == "0" || uid == "root" {
			t.Errorf("%s: runs as %q, want a non-root USER", name, user)
		}
	}
}

// The build stage sets CGO_ENABLED=0 and the control image is
// distroless/static: that holds only while no non-standard package of
// cmd/trainyard uses cgo (a cgo-only package would drop out of, or change
// in, the static build).
func TestTrainyardBuildsWithoutCgo(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	list := func(cgo string) (string, error) {
		cmd := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{len .CgoFiles}}", "./cmd/trainyard")
		cmd.Dir = repo()
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOOS=linux")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := list("1")
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[1] == "false" && f[2] != "0" {
			t.Errorf("%s uses cgo: the CGO_ENABLED=0 image build would differ", f[0])
		}
	}
	if out, err := list("0"); err != nil {
		t.Errorf("go list with CGO_ENABLED=0: %v\n%s", err, out)
	}
}
