package training

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/trainyard/trainyard/internal/agent/procenv"
	"github.com/trainyard/trainyard/internal/checkpoint"
)

// Environment a bring-your-own trainer sees (besides CUDA_VISIBLE_DEVICES).
const (
	EnvCheckpointDir = "TRAINYARD_CHECKPOINT_DIR" // synced to S3; restored before start
	EnvRunID         = "TRAINYARD_RUN_ID"
)

// CommandInput starts (or restarts) a bring-your-own trainer.
type CommandInput struct {
	RunID string `json:"run_id"`
	Spec  Spec   `json:"spec"`
	GPUs  []int  `json:"gpus"`
	// EnvPlugin, when the run names one, is served to the trainer by an
	// env server (TRAINYARD_ENV_SOCKET).
	EnvPlugin string `json:"env_plugin,omitempty"`
	// Rank, WorldSize, MasterAddr and MasterPort place this process in a
	// multi-node gang (WorldSize > 1): rank 0 syncs the checkpoint dir,
	// every rank restores it.
	Rank       int    `json:"rank,omitempty"`
	WorldSize  int    `json:"world_size,omitempty"`
	MasterAddr string `json:"master_addr,omitempty"`
	MasterPort int    `json:"master_port,omitempty"`
	// Epoch fences the run's checkpoints to this placement (checkpoint.Claim).
	Epoch int64    `json:"epoch,omitempty"`
	Dir   string   `json:"-"`
	Env   []string `json:"-"`
	// Log, when set, also gets everything the trainer prints (its log in
	// S3: internal/logstream).
	Log io.Writer `json:"-"`
}

// CommandStatus is a trainer's heartbeat and result.
type CommandStatus struct {
	Checkpoint int64  `json:"checkpoint" doc:"Newest synced checkpoint of the checkpoint dir."`
	Restored   int64  `json:"restored,omitempty" doc:"Checkpoint restored into the dir before start."`
	ExitCode   int    `json:"exit_code"`
	Output     string `json:"output" doc:"The last lines the trainer printed."`
	// Drained: the node drained (the reason); the trainer was stopped and
	// its dir synced, to continue elsewhere.
	Drained string `json:"drained,omitempty"`
	// Rank is the process's rank in a multi-node gang.
	Rank int `json:"rank,omitempty"`
}

// RunCommand runs spec.Command in its own process group with a minimal
// environment, CUDA_VISIBLE_DEVICES = exactly gpus and a checkpoint
// directory: restored from the run's newest checkpoint before start,
// synced to S3 every spec.SyncEvery while it changes, and once more at
// exit. A non-zero exit fails the run (ErrFatal, with the last line it
// printed); a cancelled ctx stops the process and syncs first; so does a
// drain of the node (Drained set, no error: the run moves).
func (r *Runner) RunCommand(ctx context.Context, in CommandInput, beat func(CommandStatus)) (CommandStatus, error) {
	st := CommandStatus{Rank: in.Rank}
	spec := in.Spec
	if err := spec.Defaulted(); err != nil {
		return st, fmt.Errorf("run %s: %w", in.RunID, err)
	}
	dir := filepath.Join(in.Dir, "runs", in.RunID, "checkpoint")
	if in.WorldSize > 1 {
		dir = filepath.Join(in.Dir, "runs", in.RunID, fmt.Sprintf("rank-%d", in.Rank), "checkpoint") // two ranks may share a node's agent dir
	}
	if err := os.RemoveAll(dir); err != nil {
		return st, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return st, err
	}
	// Every rank claims the gang's epoch (the same one: idempotent).
	m, err := r.resume(ctx, in.RunID, in.Epoch)
	if err != nil {
		return st, err
	}
	if m.Seq > 0 {
		if err := r.Checkpoints.RestoreManifest(ctx, m, dir); err != nil {
			return st, fmt.Errorf("run %s: restore checkpoint %d into %s: %w", in.RunID, m.Seq, dir, err)
		}
		st.Checkpoint, st.Restored = m.Seq, m.Seq
	}
	extra := map[string]string{EnvCheckpointDir: dir, EnvRunID: in.RunID}
	if in.EnvPlugin != "" {
		sock, name, stop, err := r.serveEnvs(ctx, filepath.Dir(dir), in.EnvPlugin)
		if err != nil {
			return st, fmt.Errorf("run %s: %w", in.RunID, err)
		}
		defer stop()
		extra[EnvSocket], extra[EnvPluginName] = sock, name
	}
	maps.Copy(extra, in.gangEnv())
	if ifc := ifaceOf(r.Address); in.WorldSize > 1 && ifc != "" {
		// gloo and NCCL advertise the address the host name resolves to,
		// which on many machines (Debian's 127.0.1.1, a container's
		// hosts file) is loopback: the other ranks could never connect.
		extra["GLOO_SOCKET_IFNAME"], extra["NCCL_SOCKET_IFNAME"] = ifc, ifc
	}
	env, err := procenv.Build(in.Env, procenv.Spec{GPUs: in.GPUs, Extra: extra})
	if err != nil {
		return st, fmt.Errorf("%w: %w", ErrFatal, err)
	}
	path, err := exec.LookPath(spec.Command[0])
	if err != nil {
		return st, fmt.Errorf("run %s: command %q: %v: %w", in.RunID, spec.Command[0], err, ErrFatal)
	}
	// Before start: a trainer that writes at once must still be synced.
	last, _ := fingerprint(dir)
	out := &procenv.Tail{Max: 16 << 10}
	printed := in.output(out)
	curves := r.commandScalars(in.RunID, printed) // TRAINYARD_SCALAR lines (command_scalars.go)
	stdout := io.MultiWriter(printed, curves)
	p, err := procenv.Start(procenv.Command{Path: path, Args: spec.Command[1:], Env: env, Dir: filepath.Dir(dir), Stdout: stdout, Stderr: stdout, DieWithParent: true})
	if err != nil {
		return st, fmt.Errorf("run %s: %w: %w", in.RunID, ErrFatal, err)
	}
	sync := func(ctx context.Context) error {
		if in.Rank > 0 {
			return nil // rank 0 keeps the gang's checkpoint and curves
		}
		curves.flush(ctx)
		fp, err := fingerprint(dir)
		if err != nil || fp == last {
			return err
		}
		m, _, err := r.Checkpoints.SaveDir(ctx, in.RunID, dir, checkpoint.Meta{Labels: map[string]string{LabelAlgo: AlgorithmCommand}, Epoch: in.Epoch})
		if err != nil {
			return fmt.Errorf("run %s: sync %s: %w", in.RunID, dir, err)
		}
		if _, err := r.Checkpoints.Prune(ctx, in.RunID, checkpoint.Retention{KeepLast: spec.KeepCheckpoints}); err != nil {
			return fmt.Errorf("run %s: retention: %w", in.RunID, err)
		}
		last, st.Checkpoint = fp, m.Seq
		return nil
	}
	every := time.Duration(spec.SyncEverySeconds) * time.Second
	tick := time.NewTicker(every)
	defer tick.Stop()
	hb := time.NewTicker(2 * time.Second)
	defer hb.Stop()
	for {
		select {
		case <-p.Done():
			err := p.Wait()
			st.Output = out.String()
			// The final state is worth keeping whatever the exit status.
			if serr := sync(context.WithoutCancel(ctx)); serr != nil {
				return st, serr
			}
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				st.ExitCode = exit.ExitCode()
				return st, fmt.Errorf("run %s: %s exited with code %d: %s: %w", in.RunID, spec.Command[0], st.ExitCode, procenv.LastLine(st.Output), ErrFatal)
			}
			return st, err
		case <-tick.C:
			if err := sync(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintf(out, "trainyard: checkpoint sync failed (will retry): %v\n", err)
			}
		case <-hb.C:
			st.Output = out.String()
			if beat != nil {
				beat(st)
			}
		case <-r.Drain.Done():
			// SIGTERM first: a trainer that writes its checkpoint dir on
			// SIGTERM loses nothing; what it wrote is synced before the run
			// moves.
			_ = p.Stop(r.Drain.Grace(30 * time.Second))
			st.Output, st.Drained = out.String(), r.Drain.Reason()
			if err := sync(context.WithoutCancel(ctx)); err != nil {
				return st, err
			}
			return st, nil
		case <-ctx.Done():
			_ = p.Stop(10 * time.Second)
			_ = sync(context.WithoutCancel(ctx))
			st.Output = out.String()
			return st, ctx.Err()
		}
	}
}

// gangEnv is what torch.distributed (init_method env://) and torchrun
// read to join a multi-node gang: one process per node, so the node rank
// is the rank and the local rank 0; torchrun's own PET_ variables let
// `torchrun --nproc-per-node G` spread a node's GPUs further.
func (in CommandInput) gangEnv() map[string]string {
	if in.WorldSize < 2 {
		return nil
	}
	rank, world, port := strconv.Itoa(in.Rank), strconv.Itoa(in.WorldSize), strconv.Itoa(in.MasterPort)
	return map[string]string{
		"MASTER_ADDR": in.MasterAddr, "MASTER_PORT": port, "WORLD_SIZE": world, "RANK": rank, "LOCAL_RANK": "0", "NODE_RANK": rank,
		"PET_MASTER_ADDR": in.MasterAddr, "PET_MASTER_PORT": port, "PET_NNODES": world, "PET_NODE_RANK": rank,
	}
}

// ifaceOf is the network interface that holds addr ("" when none does).
func ifaceOf(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == ip {
				return ifc.Name
			}
		}
	}
	return ""
}

// fingerprint summarises a directory's files (path, size, mtime), so an
// unchanged directory is not saved again.
func fingerprint(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", p, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}
