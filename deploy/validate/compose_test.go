package validate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// composeEnv is the environment compose.yaml documents as required.
var composeEnv = map[string]string{
	"TRAINYARD_TEMPORAL_ADDRESS": "temporal.internal:7233",
	"TRAINYARD_S3_ENDPOINT":      "http://minio.internal:9000",
	"AWS_ACCESS_KEY_ID":          "id",
	"AWS_SECRET_ACCESS_KEY":      "secret",
	"TRAINYARD_JOIN_SECRET":      "join",
}

// loadCompose loads deploy/compose/compose.yaml the way `docker compose
// config` does: interpolation, merge keys, and validation against the
// Compose specification's JSON schema.
func loadCompose(env map[string]string) (*types.Project, error) {
	return loadComposeFile(repo("deploy", "compose", "compose.yaml"), env)
}

func loadComposeFile(path string, env map[string]string) (*types.Project, error) {
	mapping := types.Mapping{} // the loader adds to it
	for k, v := range env {
		mapping[k] = v
	}
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Dir(path),
		ConfigFiles: []types.ConfigFile{{Filename: path}},
		Environment: mapping,
	}, func(o *loader.Options) { o.SetProjectName("trainyard", true) })
}

// The loader really validates: a misspelt key or a bad value fails.
func TestComposeSchemaCatches(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown service key", "services:\n  a:\n    image: x\n    restrat: always\n", "restrat"},
		{"ports not a list", "services:\n  a:\n    image: x\n    ports: {a: 1}\n", "ports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "compose.yaml")
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := loadComposeFile(path, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestComposeLoads(t *testing.T) {
	p, err := loadCompose(composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"server": "control", "worker": "control", "agent-1": "agent", "agent-2": "agent"}
	if len(p.Services) != len(want) {
		t.Errorf("services %v, want %v", p.ServiceNames(), want)
	}
	cmds := commands(t)
	nodes := map[string]string{}
	for name, target := range want {
		s, ok := p.Services[name]
		if !ok {
			t.Errorf("no service %s", name)
			continue
		}
		if s.Build == nil || s.Build.Target != target || !strings.HasSuffix(s.Build.Dockerfile, "deploy/Dockerfile") {
			t.Errorf("%s: build %+v, want deploy/Dockerfile target %s", name, s.Build, target)
		}
		env := map[string]bool{}
		for k, v := range s.Environment {
			if v == nil || *v == "" {
				t.Errorf("%s: %s is empty after interpolation", name, k)
			}
			env[k] = true
		}
		checkInvocation(t, cmds, invocation{where: "compose.yaml service " + name, args: s.Command, env: env})
		if s.Command[0] == "agent" {
			node := *s.Environment["TRAINYARD_NODE"]
			if other, dup := nodes[node]; dup {
				t.Errorf("%s and %s both register as node %s", name, other, node)
			}
			nodes[node] = name
		}
	}
	if got := p.Services["server"].Environment["TRAINYARD_TEMPORAL_ADDRESS"]; got == nil || *got != composeEnv["TRAINYARD_TEMPORAL_ADDRESS"] {
		t.Errorf("server's Temporal address %v, want the one from the environment", got)
	}
}

// Each required variable, when unset, stops compose with its name instead
// of starting processes that dial loopback.
func TestComposeRequiresExternalServices(t *testing.T) {
	for name := range composeEnv {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range composeEnv {
				if k != name {
					env[k] = v
				}
			}
			_, err := loadCompose(env)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("without %s: err = %v, want one naming it", name, err)
			}
		})
	}
}
