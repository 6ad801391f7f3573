// Package pluginscaffold writes a new plugin project, what
// `trainyard plugin init NAME --lang go|assemblyscript` makes: a complete
// env plugin that `trainyard plugin build NAME` compiles and
// `trainyard plugin run NAME.wasm` steps, anywhere, with no network for Go.
//
// The guest SDKs are not published on a module proxy or npm, so the project
// carries its own copy, taken from the binary (sdk.Files,
// assemblyscript.Files): a Go project replaces the SDK module with
// third_party/trainyard-sdk-go and requires nothing else; an
// AssemblyScript project keeps the SDK in third_party/trainyard-sdk-as and
// pins the compiler in its own package.json and package-lock.json (npm
// installs it on the first build).
package pluginscaffold

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/trainyard/trainyard/internal/pluginbuild"
	assemblyscript "github.com/trainyard/trainyard/sdk/assemblyscript"
	sdk "github.com/trainyard/trainyard/sdk/go"
)

// Langs are the languages Init writes projects in.
var Langs = []string{"go", "assemblyscript"}

const (
	// SDKModule is the Go guest SDK's module path.
	SDKModule = "github.com/trainyard/trainyard/sdk/go"
	// GoSDKCopy is where a Go project keeps the SDK module.
	GoSDKCopy = "third_party/trainyard-sdk-go"
)

// nameRE: the directory's name becomes the plugin's, the Go module's and
// the npm package's name, so it must suit all three.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// Init writes a new lang ("go", "assemblyscript" or "as") plugin project
// into dir, which must not exist or be empty. The plugin is named after
// dir's last element.
func Init(dir, lang string) error {
	name := filepath.Base(filepath.Clean(dir))
	if !nameRE.MatchString(name) {
		return fmt.Errorf("plugin name %q (the directory's name): want lower-case letters, digits, '.', '_' or '-', starting with a letter or digit, at most 64", name)
	}
	var files map[string][]byte
	var err error
	switch lang {
	case "go":
		files, err = goProject(name)
	case "assemblyscript", "as":
		files, err = asProject(name)
	default:
		return fmt.Errorf("unknown language %q: want %s", lang, strings.Join(Langs, " or "))
	}
	if err != nil {
		return err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("%s exists and is not empty: plugin init writes a new project", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for rel, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// copyTree adds the files of fsys under root to files at prefix/<path>,
// leaving out tests and test data.
func copyTree(files map[string][]byte, fsys fs.FS, root, prefix string) error {
	return fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files[path.Join(prefix, p)] = b
		return nil
	})
}

func goProject(name string) (map[string][]byte, error) {
	files := map[string][]byte{}
	if err := copyTree(files, sdk.Files, ".", GoSDKCopy); err != nil {
		return nil, err
	}
	// The project's go directive is the SDK's: the oldest Go that builds it.
	goVersion := ""
	for _, l := range strings.Split(string(files[GoSDKCopy+"/go.mod"]), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "go "); ok {
			goVersion = strings.TrimSpace(v)
		}
	}
	if goVersion == "" {
		return nil, errors.New("plugin init: the embedded Go SDK has no go directive")
	}
	files["go.mod"] = fmt.Appendf(nil, "module %s\n\ngo %s\n\nrequire %s v0.0.0\n\n// The SDK is not on a module proxy: this project carries it.\nreplace %s => ./%s\n",
		name, goVersion, SDKModule, SDKModule, GoSDKCopy)
	main, err := render(goMain, name)
	if err != nil {
		return nil, err
	}
	files["main.go"] = main
	files[".gitignore"] = []byte("*.wasm\n")
	return files, nil
}

func asProject(name string) (map[string][]byte, error) {
	files := map[string][]byte{}
	if err := copyTree(files, assemblyscript.Files, "assembly", pluginbuild.SDKCopy); err != nil {
		return nil, err
	}
	// package.json and its lock pin the SDK's compiler under the project's
	// name, so `npm ci` installs exactly what the SDK is tested with.
	var pkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	raw, err := fs.ReadFile(assemblyscript.Files, "package.json")
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return nil, fmt.Errorf("plugin init: the embedded package.json: %w", err)
	}
	files["package.json"], err = indentJSON(map[string]any{
		"name": name, "version": "0.1.0", "private": true, "type": "module",
		"scripts":         map[string]string{"build": "trainyard plugin build ."},
		"devDependencies": pkg.DevDependencies,
	})
	if err != nil {
		return nil, err
	}
	var lock map[string]any
	if raw, err = fs.ReadFile(assemblyscript.Files, "package-lock.json"); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		return nil, fmt.Errorf("plugin init: the embedded package-lock.json: %w", err)
	}
	pkgs, _ := lock["packages"].(map[string]any)
	if pkgs == nil {
		return nil, errors.New("plugin init: the embedded package-lock.json has no packages")
	}
	lock["name"], lock["version"] = name, "0.1.0"
	pkgs[""] = map[string]any{"name": name, "version": "0.1.0", "devDependencies": pkg.DevDependencies}
	if files["package-lock.json"], err = indentJSON(lock); err != nil {
		return nil, err
	}
	// The SDK's template plugin, pointed at the project's SDK copy.
	tmpl, err := fs.ReadFile(assemblyscript.Files, "template/assembly/index.ts")
	if err != nil {
		return nil, err
	}
	body := string(tmpl)
	if i := strings.Index(body, "export * from"); i >= 0 {
		body = body[i:] // the template's header is about building it in the repository
	}
	body = strings.ReplaceAll(body, `"../../assembly/`, `"../`+pluginbuild.SDKCopy+`/assembly/`)
	body = strings.Replace(body, `"name":"goleft"`, `"name":"`+name+`"`, 1)
	if !strings.Contains(body, `"name":"`+name+`"`) {
		return nil, errors.New("plugin init: the embedded AssemblyScript template has no \"name\":\"goleft\" to rename")
	}
	header, err := render(asHeader, name)
	if err != nil {
		return nil, err
	}
	files["assembly/index.ts"] = append(header, body...)
	files[".gitignore"] = []byte("node_modules/\n*.wasm\n")
	return files, nil
}

func indentJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

func render(t *template.Template, name string) ([]byte, error) {
	var b bytes.Buffer
	err := t.Execute(&b, map[string]string{"Name": name})
	return b.Bytes(), err
}

var goMain = template.Must(template.New("main.go").Parse(`// Command {{.Name}} is a Trainyard env plugin (ABI v1), as
// ` + "`trainyard plugin init`" + ` wrote it: "GoLeft", the agent starts at cell 9 of a
// 10-cell line and is rewarded for reaching cell 0 (action 0 moves left,
// 1 moves right). Edit the metadata and env, then:
//
//	trainyard plugin build .          # or: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o {{.Name}}.wasm .
//	trainyard plugin run {{.Name}}.wasm  # a local random rollout: steps/s, returns
//	trainyard plugin push {{.Name}}.wasm # upload
//
// The SDK (package plugin, and the reference environments in envs/) lies in
// third_party/trainyard-sdk-go; docs/plugin-abi.md in the Trainyard
// repository is the ABI.
package main

import "github.com/trainyard/trainyard/sdk/go/plugin"

const size = 10

func init() {
	plugin.RegisterEnv(plugin.Metadata{
		Name:            "{{.Name}}",
		Version:         "0.1.0",
		Description:     "walk left to cell 0",
		Observation:     plugin.Space{Kind: "box", Shape: []int{1}, Low: []float32{0}, High: []float32{size - 1}},
		Action:          plugin.Space{Kind: "discrete", N: 2},
		MaxEpisodeSteps: 50,
	}, func() plugin.Env { return &env{} })
}

func main() {}

// env is one instance; the SDK batches, seeds, resets and truncates.
type env struct{ pos int }

func (e *env) Seed(seed uint64) {} // GoLeft draws nothing

func (e *env) Reset(obs []float32) {
	e.pos = size - 1
	obs[0] = float32(e.pos)
}

func (e *env) Step(action, obs []float32) (reward float32, terminated, truncated bool) {
	if action[0] == 0 {
		e.pos = max(e.pos-1, 0)
	} else {
		e.pos = min(e.pos+1, size-1)
	}
	obs[0] = float32(e.pos)
	if e.pos == 0 {
		return 1, true, false
	}
	return 0, false, false
}
`))

var asHeader = template.Must(template.New("index.ts").Parse(`// {{.Name}}: a Trainyard env plugin (ABI v1) in AssemblyScript, as
// ` + "`trainyard plugin init`" + ` wrote it from the SDK's template. "GoLeft": the
// agent starts at cell 9 of a 10-cell grid and is rewarded for reaching
// cell 0 (action 0 moves left, 1 moves right). Edit it, then:
//
//   trainyard plugin build .            # npm ci on the first build (the compiler, pinned in package-lock.json)
//   trainyard plugin run {{.Name}}.wasm   # a local random rollout: steps/s, returns
//
// The SDK lies in third_party/trainyard-sdk-as.
`))
