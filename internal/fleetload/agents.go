package fleetload

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// fleet is the agent processes of the cluster's nodes: one `agent
// --simulate` process per group, or with real agents one `agent --node`
// process per node (the reference the hollow nodes are compared with).
type fleet struct {
	bin     string
	cluster string
	env     []string
	dir     string
	real    bool
	extra   []string // more agent flags
	groups  []group

	mu    sync.Mutex
	procs map[int][]*proc // by group index
}

func newFleet(bin, cluster, dir string, env []string, real bool, extra []string, groups []group) *fleet {
	return &fleet{bin: bin, cluster: cluster, env: env, dir: dir, real: real, extra: extra, groups: groups, procs: map[int][]*proc{}}
}

// startAll starts every group's agents.
func (f *fleet) startAll() error {
	for i := range f.groups {
		if err := f.start(i); err != nil {
			return err
		}
	}
	return nil
}

// start starts group i's agents.
func (f *fleet) start(i int) error {
	g := f.groups[i]
	var ps []*proc
	if f.real {
		for _, n := range g.nodes() {
			p, err := f.launch(n, []string{"--node", n}, g.GPUs)
			if err != nil {
				stopProcs(ps, syscall.SIGKILL)
				return err
			}
			ps = append(ps, p)
		}
	} else {
		who := []string{"--simulate", strconv.Itoa(g.Count), "--node", g.Prefix, "--memory-mb", strconv.Itoa(nodeMemoryMB)}
		if g.From != 1 {
			who = append(who, "--simulate-from", strconv.Itoa(g.From))
		}
		p, err := f.launch(g.String(), who, g.GPUs)
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	f.mu.Lock()
	f.procs[i] = ps
	f.mu.Unlock()
	return nil
}

// launch starts one agent process; name names its log and work dir. Real
// agents report this machine's memory: --memory-mb came with --simulate,
// and an older agent binary has neither.
func (f *fleet) launch(name string, who []string, gpus string) (*proc, error) {
	work := filepath.Join(f.dir, "work", name)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, fmt.Errorf("agent %s: work dir: %w", name, err)
	}
	args := append([]string{"agent", "--cluster", f.cluster}, who...)
	args = append(args, "--cpus", strconv.Itoa(nodeCPUs), "--gpus", gpus, "--work-dir", work)
	args = append(args, f.extra...)
	cmd := exec.Command(f.bin, args...)
	cmd.Dir, cmd.Env = work, append(baseEnv(), f.env...)
	return start("agent "+name, cmd, filepath.Join(f.dir, "agent-"+name+".log"))
}

// stop stops group i's agents with sig (SIGKILL: the node is lost;
// SIGTERM: it drains first) and names those that ignored a SIGTERM
// for stopGrace.
func (f *fleet) stop(i int, sig syscall.Signal) []string {
	f.mu.Lock()
	ps := f.procs[i]
	delete(f.procs, i)
	f.mu.Unlock()
	return stopProcs(ps, sig)
}

// stopAll stops every group at once.
func (f *fleet) stopAll(sig syscall.Signal) []string {
	f.mu.Lock()
	var ps []*proc
	for i, g := range f.procs {
		ps = append(ps, g...)
		delete(f.procs, i)
	}
	f.mu.Unlock()
	return stopProcs(ps, sig)
}

// stopGrace is how long an agent or dev may take to exit after SIGTERM:
// no work runs when the load stops them (hollow agents took 30 s, their
// drain timeout, when the load was written).
const stopGrace = 5 * time.Second

// stopProcs stops ps side by side and names those that needed a SIGKILL.
func stopProcs(ps []*proc, sig syscall.Signal) []string {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		killed []string
	)
	for _, p := range ps {
		wg.Go(func() {
			if !p.stop(sig, stopGrace) && sig != syscall.SIGKILL {
				mu.Lock()
				killed = append(killed, p.name)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return killed
}

// exited describes agent processes that exited on their own (a refused
// join token, a crash), with their logs' tails.
func (f *fleet) exited() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ps := range f.procs {
		for _, p := range ps {
			if !p.running() {
				out = append(out, fmt.Sprintf("%s exited: %v\n%s", p.name, p.err, p.tail()))
			}
		}
	}
	return out
}

// pids are the agent processes running now.
func (f *fleet) pids() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, ps := range f.procs {
		for _, p := range ps {
			if p.running() {
				out = append(out, p.pid())
			}
		}
	}
	return out
}

// nodes lists every node of the fleet.
func (f *fleet) nodes() []string {
	var out []string
	for _, g := range f.groups {
		out = append(out, g.nodes()...)
	}
	return out
}
