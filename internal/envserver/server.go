// Package envserver serves env plugins as vectorised envs to processes on
// the same machine (a PyTorch trainer, say) over a Unix socket, with the
// batch buffers in shared memory: a step of N envs costs one small control
// message each way, whatever N is. The plugin runs in the same sandbox and
// under the same limits as in the built-in learner (pluginhost.VecEnv).
//
// The protocol, version 1 (docs/envserver.md; sdk/python/trainyard/envs.py
// is its client):
//
//  1. The client sends one JSON line: {"env": REF, "num_envs": N, "seed": S}.
//  2. The server answers one JSON line, Hello, with a descriptor of a
//     Hello.Size-byte file to map attached (SCM_RIGHTS): the buffers at Hello.Offsets, actions
//     written by the client, the rest by the server. An error is
//     {"error": "..."}, and the connection closes.
//  3. Then lines: "reset SEED" (env i is seeded SEED+i and its first
//     observation written to obs) or "step" (actions read, obs, rewards,
//     terminated, truncated and final_obs written). Each is answered
//     "ok" once the buffers hold the result, or "error: MESSAGE".
//     "close", or closing the socket, ends the session.
package envserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/shmem"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Protocol is the version in Hello.
const Protocol = 1

// SocketEnv names the variable that gives a trainer its env server's socket.
const SocketEnv = "TRAINYARD_ENV_SOCKET"

// Request is the client's first line.
type Request struct {
	Env     string `json:"env"`
	NumEnvs int    `json:"num_envs"`
	Seed    uint64 `json:"seed"`
}

// Hello is the server's answer to a Request.
type Hello struct {
	Protocol int       `json:"protocol"`
	Plugin   string    `json:"plugin"` // name@version
	Spec     envs.Spec `json:"spec"`
	NumEnvs  int       `json:"num_envs"`
	ObsDim   int       `json:"obs_dim"`
	ActDim   int       `json:"act_dim"`
	// Offsets of the buffers in the shared memory: actions, obs, rewards
	// and final_obs float32 (little-endian, row-major: env i's values at
	// i*dim), terminated and truncated one byte (0 or 1) per env.
	Offsets map[string]int `json:"offsets"`
	Size    int            `json:"size"`
	Error   string         `json:"error,omitempty"`
}

// Opener resolves a plugin reference (a name, name@version, or whatever
// the caller accepts) to a loaded env module. Only what it opens is
// served: it is where a run's grants are enforced.
type Opener func(ctx context.Context, ref string) (*pluginhost.Module, error)

// Server serves one socket.
type Server struct {
	Open Opener
	Log  *slog.Logger

	wg sync.WaitGroup
}

// Serve accepts connections until ctx ends or the listener fails, then
// waits for the sessions to end (they end with ctx).
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer s.wg.Wait()
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("env server: %w", err)
		}
		s.wg.Go(func() {
			defer conn.Close()
			closeOnDone := context.AfterFunc(ctx, func() { conn.Close() })
			defer closeOnDone()
			if err := s.session(ctx, conn); err != nil && s.Log != nil {
				s.Log.Warn("env server session", "err", err)
			}
		})
	}
}

// session is one client: a VecEnv over shared buffers until it leaves.
func (s *Server) session(ctx context.Context, conn *net.UnixConn) error {
	r := bufio.NewReader(conn)
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return refuse(conn, fmt.Errorf("request: %w", err))
	}
	if req.Env == "" || req.NumEnvs < 1 {
		return refuse(conn, fmt.Errorf("request: env (a plugin) and num_envs >= 1 are required"))
	}
	mod, err := s.Open(ctx, req.Env)
	if err != nil {
		return refuse(conn, err)
	}
	v, err := mod.NewVecEnv(ctx, req.NumEnvs, req.Seed)
	if err != nil {
		return refuse(conn, err)
	}
	defer v.Close()
	md := mod.Metadata()
	b, err := newBuffers(v.NumEnvs(), md.Observation.Dim(), md.Action.Dim())
	if err != nil {
		return refuse(conn, err)
	}
	defer b.Close()
	hello := Hello{Protocol: Protocol, Plugin: md.Name + "@" + md.Version, Spec: v.Spec(), NumEnvs: v.NumEnvs(),
		ObsDim: b.od, ActDim: b.ad, Offsets: b.offsets, Size: len(b.Mem)}
	msg, _ := json.Marshal(hello)
	if _, _, err := conn.WriteMsgUnix(append(msg, '\n'), unix.UnixRights(b.Fd()), nil); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read: %w", err)
		}
		cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		var opErr error
		switch cmd {
		case "step":
			opErr = v.Step(b.actions, b.obs, b.rewards, b.term, b.trunc, b.finalObs)
		case "reset":
			seed, perr := strconv.ParseUint(arg, 10, 64)
			if perr != nil {
				opErr = fmt.Errorf("reset: seed %q: want an unsigned integer", arg)
				break
			}
			opErr = v.Reset(seed, b.obs)
		case "close":
			return nil
		default:
			opErr = fmt.Errorf("unknown command %q (want step, reset SEED or close)", cmd)
		}
		reply := "ok\n"
		if opErr != nil {
			reply = "error: " + strings.ReplaceAll(opErr.Error(), "\n", "; ") + "\n"
		}
		if _, err := io.WriteString(conn, reply); err != nil {
			return fmt.Errorf("reply: %w", err)
		}
	}
}

// refuse answers a request with an error line and returns the error.
func refuse(conn *net.UnixConn, err error) error {
	msg, _ := json.Marshal(Hello{Error: err.Error()})
	conn.Write(append(msg, '\n'))
	return err
}

// buffers are a session's batch buffers in one shared file (package
// shmem): the client maps the same pages through the descriptor it is
// sent, so nothing is copied over the socket.
type buffers struct {
	*shmem.File
	od, ad  int
	offsets map[string]int

	actions, obs, rewards, finalObs []float32
	term, trunc                     []bool
}

func newBuffers(n, od, ad int) (*buffers, error) {
	offsets, size := shmem.Layout(shmem.Field{Name: "actions", Bytes: 4 * n * ad}, shmem.Field{Name: "obs", Bytes: 4 * n * od},
		shmem.Field{Name: "rewards", Bytes: 4 * n}, shmem.Field{Name: "terminated", Bytes: n}, shmem.Field{Name: "truncated", Bytes: n},
		shmem.Field{Name: "final_obs", Bytes: 4 * n * od})
	f, err := shmem.New("trainyard-envs", size)
	if err != nil {
		return nil, err
	}
	b := &buffers{File: f, od: od, ad: ad, offsets: offsets}
	b.actions, b.obs, b.rewards, b.finalObs = f.Float32s(offsets["actions"], n*ad), f.Float32s(offsets["obs"], n*od), f.Float32s(offsets["rewards"], n), f.Float32s(offsets["final_obs"], n*od)
	b.term, b.trunc = f.Bools(offsets["terminated"], n), f.Bools(offsets["truncated"], n)
	return b, nil
}

// Modules is an Opener that fetches each reference's module once, loads it
// on rt and keeps it for later sessions. With allow non-empty, only those
// references are served.
func Modules(rt *pluginhost.Runtime, fetch func(ctx context.Context, ref string) ([]byte, error), allow []string) (Opener, func(context.Context)) {
	var mu sync.Mutex
	loaded := map[string]*pluginhost.Module{}
	open := func(ctx context.Context, ref string) (*pluginhost.Module, error) {
		if len(allow) > 0 && !slices.Contains(allow, ref) {
			return nil, fmt.Errorf("plugin %q is not served here (this server serves %s)", ref, strings.Join(allow, ", "))
		}
		mu.Lock()
		defer mu.Unlock()
		if m, ok := loaded[ref]; ok {
			return m, nil
		}
		wasm, err := fetch(ctx, ref)
		if err != nil {
			return nil, err
		}
		m, err := rt.Load(ctx, wasm, pluginhost.LoadOptions{})
		if err != nil {
			return nil, err
		}
		if m.Metadata().Kind != pluginhost.KindEnv {
			m.Close(ctx)
			return nil, fmt.Errorf("plugin %s is a %s plugin, not an env", m.Metadata().Label(), m.Metadata().Kind)
		}
		loaded[ref] = m
		return m, nil
	}
	closeAll := func(ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range loaded {
			m.Close(ctx)
		}
		clear(loaded)
	}
	return open, closeAll
}
