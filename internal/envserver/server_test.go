package envserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/internal/pythontest"
)

// python runs the Python client: Debian's, which has python3-numpy.
const python = pythontest.Python

func needNumpy(t testing.TB) {
	t.Helper()
	pythontest.Require(t, "TRAINYARD_REQUIRE_NUMPY", "python-numpy", "numpy")
}

// testServer serves the given plugins (name -> module) on a socket in a
// temporary directory and returns its path and the runtime they load on.
func testServer(t testing.TB, plugins map[string][]byte) (string, *pluginhost.Runtime) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	open, closeAll := Modules(rt, func(_ context.Context, ref string) ([]byte, error) {
		if w, ok := plugins[ref]; ok {
			return w, nil
		}
		return nil, fmt.Errorf("plugin %q: not found", ref)
	}, nil)
	dir, err := os.MkdirTemp("", "envs") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- (&Server{Open: open}).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		closeAll(context.Background())
		rt.Close(context.Background())
		os.RemoveAll(dir)
	})
	return path, rt
}

func pythonEnv(t testing.TB) []string {
	return append(os.Environ(), "PYTHONPATH="+filepath.Join(plugintest.Root(t), "sdk", "python"))
}

// TestPythonClientMatchesHost: the Python client steps CartPole (discrete
// actions, short episodes: autoresets every few steps) and Pendulum (box
// actions, truncation at 200 steps) through the env server with seeded
// random actions; the same module stepped in process with the same seeds
// and actions gives the same observations, rewards, flags and final
// observations, bit for bit.
func TestPythonClientMatchesHost(t *testing.T) {
	needNumpy(t)
	plugins := map[string][]byte{
		"CartPole-v1": plugintest.BuildGo(t, "./plugins/cartpole"),
		"Pendulum-v1": plugintest.BuildGo(t, "./plugins/pendulum"),
	}
	sock, rt := testServer(t, plugins)
	for _, tc := range []struct {
		env          string
		n, steps     int
		seed         uint64
		wantResets   bool
		wantTruncate bool
	}{
		{"CartPole-v1", 16, 300, 7, true, false},
		{"CartPole-v1", 1, 50, 0, true, false},
		{"Pendulum-v1", 4, 420, 11, true, true},
	} {
		t.Run(fmt.Sprintf("%s/n=%d", tc.env, tc.n), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "trace.bin")
			cmd := exec.Command(python, filepath.Join(plugintest.Root(t), "sdk/python/tests/trace.py"), "--socket", sock, "--env", tc.env,
				"--num-envs", fmt.Sprint(tc.n), "--steps", fmt.Sprint(tc.steps), "--seed", fmt.Sprint(tc.seed), "--out", out)
			cmd.Env = pythonEnv(t)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("trace.py: %v\n%s", err, b)
			}
			tr := readTrace(t, out)
			mod, err := rt.Load(context.Background(), plugins[tc.env], pluginhost.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(context.Background())
			v, err := mod.NewVecEnv(context.Background(), tc.n, tc.seed)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			n, od := tc.n, tr.ObsDim
			obs, rew, final := make([]float32, n*od), make([]float32, n), make([]float32, n*od)
			term, trunc := make([]bool, n), make([]bool, n)
			if err := v.Reset(tc.seed, obs); err != nil {
				t.Fatal(err)
			}
			tr.same(t, "reset obs", obs)
			var resets, truncations int
			for s := range tc.steps {
				actions := tr.f32(n * tr.ActDim)
				clear(final)
				if err := v.Step(actions, obs, rew, term, trunc, final); err != nil {
					t.Fatal(err)
				}
				for i := range n {
					if !term[i] && !trunc[i] {
						clear(final[i*od : (i+1)*od]) // the client's trace has zeros there
					} else {
						resets++
					}
					if trunc[i] {
						truncations++
					}
				}
				where := fmt.Sprintf("step %d", s)
				tr.same(t, where+" obs", obs)
				tr.same(t, where+" rewards", rew)
				tr.sameFlags(t, where+" terminated", term)
				tr.sameFlags(t, where+" truncated", trunc)
				tr.same(t, where+" final obs", final)
			}
			if tr.Len() != 0 {
				t.Fatalf("%d bytes left in the trace", tr.Len())
			}
			t.Logf("%d steps of %d envs equal, %d autoresets (%d truncations)", tc.steps, n, resets, truncations)
			if tc.wantResets != (resets > 0) || tc.wantTruncate != (truncations > 0) {
				t.Errorf("%d autoresets, %d truncations: the trace does not cover what it should", resets, truncations)
			}
		})
	}
}

// trace is trace.py's output being read.
type trace struct {
	*bytes.Reader
	NumEnvs int `json:"num_envs"`
	Steps   int `json:"steps"`
	ObsDim  int `json:"obs_dim"`
	ActDim  int `json:"act_dim"`
}

func readTrace(t *testing.T, path string) *trace {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		t.Fatalf("trace: no header line")
	}
	tr := &trace{}
	if err := json.Unmarshal(head, tr); err != nil {
		t.Fatalf("trace header %s: %v", head, err)
	}
	tr.Reader = bytes.NewReader(rest)
	return tr
}

func (tr *trace) f32(n int) []float32 {
	out := make([]float32, n)
	if err := binary.Read(tr, binary.LittleEndian, out); err != nil {
		panic(fmt.Sprintf("trace: %d float32: %v", n, err))
	}
	return out
}

func (tr *trace) same(t *testing.T, what string, want []float32) {
	t.Helper()
	got := tr.f32(len(want))
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s [%d]: client %v, host %v", what, i, got[i], want[i])
		}
	}
}

func (tr *trace) sameFlags(t *testing.T, what string, want []bool) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := tr.Read(got); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if (got[i] != 0) != want[i] {
			t.Fatalf("%s [%d]: client %v, host %v", what, i, got[i], want[i])
		}
	}
}

// TestProtocolErrors: what a client gets wrong is answered with a line
// saying what, and the session goes on where it can.
func TestProtocolErrors(t *testing.T) {
	cartpole := plugintest.BuildGo(t, "./plugins/cartpole")
	sock, _ := testServer(t, map[string][]byte{"CartPole-v1": cartpole, "shaping": plugintest.BuildGo(t, "./plugins/shaping")})
	hello := func(t *testing.T, req string) (Hello, *net.UnixConn, *bufio.Reader) {
		t.Helper()
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte(req + "\n")); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var h Hello
		if err := json.Unmarshal(line, &h); err != nil {
			t.Fatalf("hello %s: %v", line, err)
		}
		return h, c, r
	}
	for _, tc := range []struct{ req, want string }{
		{`{"env":"nope","num_envs":4}`, `plugin "nope": not found`},
		{`{"env":"CartPole-v1","num_envs":0}`, "num_envs >= 1"},
		{`{"env":"CartPole-v1","num_envs":100000000}`, "outside [1,65536]"},
		{`{"env":"shaping","num_envs":4}`, "not an env"},
		{`not json`, "request:"},
	} {
		h, _, _ := hello(t, tc.req)
		if !strings.Contains(h.Error, tc.want) {
			t.Errorf("%s: error %q, want it to say %q", tc.req, h.Error, tc.want)
		}
	}
	h, c, r := hello(t, `{"env":"CartPole-v1","num_envs":4,"seed":1}`)
	if h.Error != "" || h.NumEnvs != 4 || h.ObsDim != 4 || h.ActDim != 1 || h.Plugin != "CartPole-v1@1.0.0" {
		t.Fatalf("hello %+v", h)
	}
	for _, tc := range []struct{ cmd, want string }{
		{"reset x", `seed "x"`},
		{"jump", `unknown command "jump"`},
		{"reset 3", "ok"},
		{"step", "ok"},
	} {
		if _, err := c.Write([]byte(tc.cmd + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(line, tc.want) {
			t.Errorf("%s: %q, want %q", tc.cmd, line, tc.want)
		}
	}
}
