// Command scale is `make scale`: one control plane against fleets of
// hollow nodes of each size, jobs submitted at a rate, and a table of
// what it cost (internal/fleetload). Each size gets a fresh `trainyard
// dev`; results go to OUT/results.json (and OUT/<stamp>/ with each size's
// logs), the table to stdout and OUT/table.md.
//
//	go run ./internal/tools/scale --sizes 100,300,1000 --jobs 10000 --rate 200
//
// --dev-binary and --agent-binary let an older control plane (built from
// an earlier commit) face the same scenario; --real-agents runs one real
// agent process per node instead of --simulate (small fleets: the
// reference the hollow nodes are compared with).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/internal/fleetload"
)

type config struct {
	sizes      []int
	out        string
	keepData   bool
	opts       fleetload.Options
	sizesFlag  string
	agentArgs  string
	failOnProb bool
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := run(ctx, c)
	stop()
	os.Exit(code)
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	o := &c.opts
	fs.StringVar(&c.sizesFlag, "sizes", "100,300,1000", "fleet sizes (nodes), comma-separated; a fresh control plane for each")
	fs.IntVar(&o.Jobs, "jobs", 10000, "jobs submitted per size")
	fs.Float64Var(&o.Rate, "rate", 200, "most submissions per second")
	fs.IntVar(&o.Workers, "workers", 32, "goroutines submitting")
	fs.IntVar(&o.MaxOpen, "max-open", 0, "hold submissions while this many accepted jobs have not ended (0: open loop at --rate)")
	fs.DurationVar(&o.MinDuration, "min-duration", time.Second, "shortest job")
	fs.DurationVar(&o.MaxDuration, "max-duration", 120*time.Second, "longest job")
	fs.Float64Var(&o.Churn, "churn", 0, "agent processes killed (and restarted after --churn-downtime) per minute; 0: none")
	fs.IntVar(&o.ChurnGroups, "churn-groups", 4, "with --churn: agent processes per node shape")
	fs.DurationVar(&o.ChurnDowntime, "churn-downtime", 20*time.Second, "with --churn: how long a killed agent process stays down")
	fs.StringVar(&o.DevBinary, "dev-binary", "bin/trainyard", "trainyard binary that runs the control plane (`dev`)")
	fs.StringVar(&o.AgentBinary, "agent-binary", "bin/trainyard", "trainyard binary that runs the agents")
	fs.BoolVar(&o.RealAgents, "real-agents", false, "one real `agent --node` process per node instead of `agent --simulate` (small sizes)")
	fs.StringVar(&c.agentArgs, "agent-args", "", "more flags for every agent process, space-separated")
	fs.IntVar(&o.GPUEvery, "gpu-every", 4, "one node in this many has 2 GPUs (-1: none)")
	fs.DurationVar(&o.Idle, "idle", time.Minute, "how long the joined fleet idles before the first job (heartbeat cost at rest)")
	fs.DurationVar(&o.Poll, "poll", 2*time.Second, "how often status and the other routes are sampled")
	fs.BoolVar(&o.StatusOnly, "status-only", false, "sample only the cluster status, not usage, runs, queue and a job")
	fs.DurationVar(&o.JoinTimeout, "join-timeout", 0, "wait for every node to be up (default 2m + 100ms a node)")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", 0, "wait for every job to end after the last submission (default max-duration + 10m)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the job mix")
	fs.StringVar(&c.out, "out", ".cache/scale", "results folder")
	fs.BoolVar(&c.keepData, "keep-data", false, "keep each size's data dir (Temporal's database, S3) besides its logs")
	fs.BoolVar(&c.failOnProb, "strict", false, "exit 1 when a size reports problems (lost jobs, flaps, held allocations)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range strings.Split(c.sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return c, fmt.Errorf("--sizes %q: want positive integers", c.sizesFlag)
		}
		c.sizes = append(c.sizes, n)
	}
	o.AgentArgs = strings.Fields(c.agentArgs)
	o.Logf = log.Printf
	return c, nil
}

// run measures every size in turn and reports; its result is the exit
// code.
func run(ctx context.Context, c config) int {
	stamp := time.Now().Format("20060102-150405")
	base := filepath.Join(c.out, stamp)
	var results []*fleetload.Result
	code := 0
	for _, n := range c.sizes {
		o := c.opts
		o.Nodes, o.Dir = n, filepath.Join(base, fmt.Sprintf("n%d", n))
		res, err := fleetload.Run(ctx, o)
		if !c.keepData {
			os.RemoveAll(filepath.Join(o.Dir, "data"))
		}
		if err != nil {
			log.Printf("scale: %d nodes: %v (logs in %s)", n, err, o.Dir)
			code = 1
		}
		if res != nil && err == nil {
			results = append(results, res)
			if len(res.Problems) > 0 && c.failOnProb {
				code = 1
			}
		}
		if ctx.Err() != nil {
			break
		}
		// Written after each size: a long run interrupted keeps what it had.
		if err := report(c.out, base, results); err != nil {
			log.Print(err)
			code = 1
		}
	}
	if err := report(c.out, base, results); err != nil {
		log.Print(err)
		code = 1
	}
	var tbl bytes.Buffer
	fleetload.Table(&tbl, results)
	fmt.Print(tbl.String())
	for _, r := range results {
		for _, p := range r.Problems {
			fmt.Printf("- %d nodes: %s\n", r.Size, firstLine(p))
		}
	}
	fmt.Printf("\nresults: %s\n", filepath.Join(c.out, "results.json"))
	return code
}

// report writes the results and their table to the run's folder and as
// the latest in out.
func report(out, base string, results []*fleetload.Result) error {
	var tbl bytes.Buffer
	fleetload.Table(&tbl, results)
	for _, dir := range []string{base, out} {
		if err := fleetload.WriteJSON(filepath.Join(dir, "results.json"), results); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "table.md"), tbl.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
