package pluginhost

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Worker mode: an env plugin's instance runs in a child process compiled
// WITHOUT wazero's interruption checks, and the parent enforces the call
// deadline by killing the child (docs/plugin-abi.md §7). Buffers are a
// shared memory file; each call is one byte each way over pipes.

// workerEnvVar marks a process started as a plugin worker.
const workerEnvVar = "TRAINYARD_PLUGIN_WORKER"

// Worker replies.
const (
	workerOK       byte = 0
	workerBadInput byte = 1
	workerFailed   byte = 2 // the worker exits after this reply
)

const (
	shmHeader = 64      // seed u64 at 0, error length u32 at 8
	shmErrCap = 4 << 10 // error message area at the end
)

type workerHello struct {
	CacheDir string
	Limits   Limits
	N        int
	Seed     uint64
	WasmLen  int
}

// ServeWorkerIfChild turns this process into a plugin worker and exits when
// it was started as one (by NewWorkerVecEnv); otherwise it returns at once.
// Call it first thing in main, and in TestMain of packages whose tests use
// worker mode.
func ServeWorkerIfChild() {
	if os.Getenv(workerEnvVar) != "1" {
		return
	}
	if err := serveWorker(os.Stdin, os.Stdout, os.NewFile(3, "shm")); err != nil {
		fmt.Fprintln(os.Stderr, "plugin worker:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// shmLayout are the byte offsets of the buffers in the shared file.
type shmLayout struct {
	actions, obs, rewards, term, trunc, finalObs, errMsg, size int
}

func layout(n, od, ad int) shmLayout {
	var l shmLayout
	off := shmHeader
	next := func(size int) int { o := off; off += (size + 7) &^ 7; return o }
	l.actions, l.obs, l.rewards = next(4*n*ad), next(4*n*od), next(4*n)
	l.term, l.trunc, l.finalObs = next(n), next(n), next(4*n*od)
	l.errMsg = next(shmErrCap)
	l.size = off
	return l
}

func f32view(b []byte, off, n int) []float32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[off])), n)
}

func boolView(b []byte, off, n int) []bool {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*bool)(unsafe.Pointer(&b[off])), n)
}

func serveWorker(in io.Reader, out io.Writer, shmFile *os.File) error {
	br := bufio.NewReader(in)
	var hello workerHello
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	if err := json.Unmarshal(line, &hello); err != nil {
		return fmt.Errorf("decode hello: %w", err)
	}
	wasm := make([]byte, hello.WasmLen)
	if _, err := io.ReadFull(br, wasm); err != nil {
		return fmt.Errorf("read module: %w", err)
	}
	ctx := context.Background()
	rt, err := NewRuntime(ctx, RuntimeConfig{CacheDir: hello.CacheDir, noInterrupt: true})
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	st, err := shmFile.Stat()
	if err != nil {
		return err
	}
	shm, err := syscall.Mmap(int(shmFile.Fd()), 0, int(st.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap: %w", err)
	}
	reply := func(code byte, err error) error {
		if err != nil {
			msg := err.Error()
			l := len(shm) - shmErrCap
			n := copy(shm[l:], msg)
			binary.LittleEndian.PutUint32(shm[8:], uint32(n))
		}
		_, werr := out.Write([]byte{code})
		return werr
	}
	m, err := rt.Load(ctx, wasm, LoadOptions{Limits: hello.Limits})
	if err != nil {
		return reply(workerFailed, err)
	}
	v, err := m.NewVecEnv(ctx, hello.N, hello.Seed)
	if err != nil {
		return reply(workerFailed, err)
	}
	od, ad, n := v.od, v.ad, v.n
	l := layout(n, od, ad)
	if l.size != len(shm) {
		return reply(workerFailed, fmt.Errorf("shared memory is %d bytes, want %d", len(shm), l.size))
	}
	if err := reply(workerOK, nil); err != nil {
		return err
	}
	act, obs, rew := f32view(shm, l.actions, n*ad), f32view(shm, l.obs, n*od), f32view(shm, l.rewards, n)
	term, trunc, fin := boolView(shm, l.term, n), boolView(shm, l.trunc, n), f32view(shm, l.finalObs, n*od)
	cmd := make([]byte, 1)
	for {
		if _, err := io.ReadFull(br, cmd); err != nil {
			return nil // parent closed the pipe: done
		}
		var err error
		switch cmd[0] {
		case 'r':
			err = v.Reset(binary.LittleEndian.Uint64(shm[0:]), obs)
		case 's':
			err = v.Step(act, obs, rew, term, trunc, fin)
		default:
			err = fmt.Errorf("%w: unknown worker command %q", ErrProtocol, cmd[0])
		}
		switch {
		case err == nil:
			err = reply(workerOK, nil)
		case errors.Is(err, ErrBadInput):
			err = reply(workerBadInput, err)
		default:
			_ = reply(workerFailed, err)
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// WorkerVecEnv is an env plugin batch in a supervised child process: the
// sandbox minus wazero's interruption checks, plus a process boundary. A call
// past its deadline kills the child. Use it for large batches of plugins
// whose step cost is dominated by interruption checks (Go-built guests); it
// adds a few µs per call, so small batches are faster in process.
type WorkerVecEnv struct {
	m       *Module
	command []string
	n, seed uint64
	spec    envs.Spec
	od, ad  int
	l       shmLayout

	cmd    *exec.Cmd
	req    *os.File
	resp   *os.File
	shm    []byte
	stderr *tailWriter
	closed bool
}

var _ envs.VecEnv = (*WorkerVecEnv)(nil)

// NewWorkerVecEnv starts a worker process running n environments of m.
// command is the worker executable and arguments; nil re-executes this
// binary, which must call ServeWorkerIfChild at startup. Modules loaded with
// host functions cannot run in a worker (grants do not cross processes).
func (m *Module) NewWorkerVecEnv(ctx context.Context, n int, seed uint64, command []string) (*WorkerVecEnv, error) {
	if m.meta.Kind != KindEnv {
		return nil, fmt.Errorf("plugin %s: NewWorkerVecEnv: kind is %q, not env", m.label, m.meta.Kind)
	}
	if m.granted > 0 {
		return nil, fmt.Errorf("plugin %s: NewWorkerVecEnv: host functions cannot be granted across processes", m.label)
	}
	if n < 1 || n > m.limits.MaxEnvs {
		return nil, fmt.Errorf("plugin %s: NewWorkerVecEnv: n = %d outside [1,%d]", m.label, n, m.limits.MaxEnvs)
	}
	if command == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("plugin %s: worker executable: %w", m.label, err)
		}
		command = []string{exe}
	}
	w := &WorkerVecEnv{m: m, command: command, n: uint64(n), seed: seed, spec: m.meta.Spec(),
		od: m.meta.Observation.Dim(), ad: m.meta.Action.Dim()}
	w.l = layout(n, w.od, w.ad)
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *WorkerVecEnv) fail(call string, err error) error {
	return &CallError{Plugin: w.m.label, Call: call, Err: err}
}

func (w *WorkerVecEnv) start(ctx context.Context) error {
	f, err := os.CreateTemp("", "trainyard-plugin-shm-*")
	if err != nil {
		return w.fail("worker", err)
	}
	defer f.Close()
	_ = os.Remove(f.Name()) // unlinked: lives as long as the mappings
	if err := f.Truncate(int64(w.l.size)); err != nil {
		return w.fail("worker", err)
	}
	shm, err := syscall.Mmap(int(f.Fd()), 0, w.l.size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return w.fail("worker", fmt.Errorf("mmap: %w", err))
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		_ = syscall.Munmap(shm)
		return w.fail("worker", err)
	}
	respR, respW, err := os.Pipe()
	if err != nil {
		_ = syscall.Munmap(shm)
		reqR.Close()
		reqW.Close()
		return w.fail("worker", err)
	}
	w.stderr = &tailWriter{max: w.m.limits.MaxStderrBytes}
	cmd := exec.Command(w.command[0], w.command[1:]...)
	// Only what the worker needs: no inherited environment.
	cmd.Env = []string{workerEnvVar + "=1", "GOTRACEBACK=single"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = reqR, respW, w.stderr
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		_ = syscall.Munmap(shm)
		reqR.Close()
		reqW.Close()
		respR.Close()
		respW.Close()
		return w.fail("worker", fmt.Errorf("start %s: %w", w.command[0], err))
	}
	reqR.Close()
	respW.Close()
	w.cmd, w.req, w.resp, w.shm = cmd, reqW, respR, shm
	hello, _ := json.Marshal(workerHello{CacheDir: w.m.rt.cfg.CacheDir, Limits: w.m.limits, N: int(w.n), Seed: w.seed, WasmLen: len(w.m.wasm)})
	if _, err := w.req.Write(append(append(hello, '\n'), w.m.wasm...)); err != nil {
		w.kill()
		return w.fail("worker", fmt.Errorf("send module: %w", err))
	}
	// The allowance includes a cold compile: under -race on a loaded 2-core
	// machine with a cold cache one took 32 s (make test, TestWorkerHostile).
	return w.await(ctx, "worker start", w.m.limits.InitTimeout+90*time.Second)
}

// await reads the worker's one-byte reply within timeout.
func (w *WorkerVecEnv) await(ctx context.Context, call string, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		w.kill()
		return w.fail(call, err)
	}
	_ = w.resp.SetReadDeadline(time.Now().Add(timeout))
	var b [1]byte
	start := time.Now()
	_, err := io.ReadFull(w.resp, b[:])
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.kill()
		return w.fail(call, fmt.Errorf("%w: ran %v, limit %v; worker killed", ErrTimeout, time.Since(start).Round(time.Millisecond), timeout))
	case err != nil:
		w.kill()
		cause := fmt.Errorf("%w: worker died (%v)", ErrTrap, w.cmd.ProcessState)
		if s := w.stderr.String(); s != "" {
			cause = fmt.Errorf("%w; stderr: %s", cause, stderrSummary(s))
		}
		return w.fail(call, cause)
	}
	if b[0] == workerOK {
		return nil
	}
	msg := string(w.shm[w.l.errMsg : w.l.errMsg+int(binary.LittleEndian.Uint32(w.shm[8:]))])
	if b[0] == workerBadInput {
		return w.fail(call, fmt.Errorf("%w (in worker): %s", ErrBadInput, msg))
	}
	w.kill()
	return workerError(w.m.label, call, msg)
}

// workerError rebuilds the sentinel of an error reported by the worker.
func workerError(label, call, msg string) error {
	for _, s := range []error{ErrTimeout, ErrOutOfMemory, ErrTrap, ErrGuestFault, ErrProtocol, ErrInvalidPlugin, ErrMetadata} {
		if containsErr(msg, s) {
			return &CallError{Plugin: label, Call: call, Err: fmt.Errorf("%w (in worker): %s", s, msg)}
		}
	}
	return &CallError{Plugin: label, Call: call, Err: fmt.Errorf("%w (in worker): %s", ErrTrap, msg)}
}

func containsErr(msg string, sentinel error) bool {
	return strings.Contains(msg, sentinel.Error())
}

// kill stops the worker and releases its resources.
func (w *WorkerVecEnv) kill() {
	if w.cmd == nil {
		return
	}
	_ = w.cmd.Process.Kill()
	w.req.Close()
	_ = w.cmd.Wait()
	w.resp.Close()
	_ = syscall.Munmap(w.shm)
	w.cmd, w.shm = nil, nil
}

func (w *WorkerVecEnv) Spec() envs.Spec { return w.spec }
func (w *WorkerVecEnv) NumEnvs() int    { return int(w.n) }

// Reset seeds environment i with seed+i; after a failure it starts a new worker.
func (w *WorkerVecEnv) Reset(seed uint64, obs []float32) error {
	if w.closed {
		return w.fail("reset", ErrClosed)
	}
	n := int(w.n)
	if len(obs) != n*w.od {
		return fmt.Errorf("plugin %s: reset: obs has %d values, want %d", w.m.label, len(obs), n*w.od)
	}
	if w.cmd == nil {
		if err := w.start(context.Background()); err != nil {
			return err
		}
	}
	binary.LittleEndian.PutUint64(w.shm[0:], seed)
	if _, err := w.req.Write([]byte{'r'}); err != nil {
		w.kill()
		return w.fail("reset", fmt.Errorf("%w: worker gone: %v", ErrTrap, err))
	}
	if err := w.await(context.Background(), "reset", w.m.limits.CallTimeout); err != nil {
		return err
	}
	copy(obs, f32view(w.shm, w.l.obs, n*w.od))
	return nil
}

// Step steps all environments; see envs.VecEnv.
func (w *WorkerVecEnv) Step(actions, obs, rewards []float32, terminated, truncated []bool, finalObs []float32) error {
	if w.closed {
		return w.fail("step_batch", ErrClosed)
	}
	if w.cmd == nil {
		return fmt.Errorf("plugin %s: step_batch: the worker was stopped after a failure; call Reset", w.m.label)
	}
	n, od, ad := int(w.n), w.od, w.ad
	if len(actions) != n*ad || len(obs) != n*od || len(rewards) != n || len(terminated) != n || len(truncated) != n || len(finalObs) != n*od {
		return fmt.Errorf("plugin %s: step_batch: buffer sizes do not match n=%d obs_dim=%d act_dim=%d", w.m.label, n, od, ad)
	}
	copy(f32view(w.shm, w.l.actions, n*ad), actions)
	if _, err := w.req.Write([]byte{'s'}); err != nil {
		w.kill()
		return w.fail("step_batch", fmt.Errorf("%w: worker gone: %v", ErrTrap, err))
	}
	if err := w.await(context.Background(), "step_batch", w.m.limits.CallTimeout); err != nil {
		return err
	}
	copy(obs, f32view(w.shm, w.l.obs, n*od))
	copy(rewards, f32view(w.shm, w.l.rewards, n))
	copy(terminated, boolView(w.shm, w.l.term, n))
	copy(truncated, boolView(w.shm, w.l.trunc, n))
	fo := f32view(w.shm, w.l.finalObs, n*od)
	for i := 0; i < n; i++ {
		if terminated[i] || truncated[i] {
			copy(finalObs[i*od:(i+1)*od], fo[i*od:(i+1)*od])
		}
	}
	return nil
}

// Close stops the worker.
func (w *WorkerVecEnv) Close() error {
	if !w.closed {
		w.closed = true
		w.kill()
	}
	return nil
}
