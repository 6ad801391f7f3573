package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/apiclient"
	"github.com/trainyard/trainyard/workflows/job"
)

// newJobLogsCmd is `job logs`: a job's output from S3, live with -f.
func newJobLogsCmd(cf *clientFlags) *cobra.Command {
	var follow bool
	var instance int
	cmd := &cobra.Command{
		Use:   "logs JOB [-f] [--instance N]",
		Short: "A job's output (stdout and stderr), as its node uploads it about every second; -f follows until the job ends",
		Long: "Without --instance, a gang job's instances are shown side by side, each line prefixed with its role and\n" +
			"instance (role#n); --instance N shows one (N as `job show` lists them, from 0) as printed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx, id := cmd.Context(), args[0]
			if cmd.Flags().Changed("instance") {
				return c.Stream(ctx, jobLogPath(id, instance, follow), os.Stdout)
			}
			var j struct {
				Progress job.Progress `json:"progress"`
			}
			if err := c.JSON(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &j); err != nil {
				return err
			}
			if len(j.Progress.Instances) < 2 {
				return c.Stream(ctx, jobLogPath(id, 0, follow), os.Stdout)
			}
			var mu sync.Mutex
			g, gctx := errgroup.WithContext(ctx)
			for i, in := range j.Progress.Instances {
				w := &prefixWriter{mu: &mu, w: os.Stdout, prefix: fmt.Sprintf("%s#%d | ", in.Role, in.Instance)}
				g.Go(func() error {
					defer w.Close()
					return c.Stream(gctx, jobLogPath(id, i, follow), w)
				})
			}
			return g.Wait()
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the job ends")
	cmd.Flags().IntVar(&instance, "instance", 0, "one instance of a gang job (0 for a single-process job)")
	return cmd
}

func jobLogPath(id string, instance int, follow bool) string {
	return fmt.Sprintf("/v1/jobs/%s/logs?instance=%d&follow=%t", url.PathEscape(id), instance, follow)
}

// commandRunLogs is `run logs` of a command run: the trainer's output as
// printed, then the run's events and final state.
func commandRunLogs(ctx context.Context, c *apiclient.Client, id string, rank int, follow bool) error {
	if err := c.Stream(ctx, fmt.Sprintf("/v1/runs/%s/output?rank=%d&follow=%t", url.PathEscape(id), rank, follow), os.Stdout); err != nil {
		return err
	}
	r, err := getRun(ctx, c, id)
	if err != nil {
		return err
	}
	for _, l := range api.RunLogLines(r) {
		if !strings.HasPrefix(l, "out ") { // the output's tail: shown whole above
			fmt.Fprintln(os.Stdout, l)
		}
	}
	return nil
}

// prefixWriter writes whole lines, each with prefix, to a writer it shares
// (under mu) with others, so lines of concurrent logs never mix.
type prefixWriter struct {
	mu      *sync.Mutex
	w       io.Writer
	prefix  string
	partial []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.partial = append(p.partial, b...)
	i := bytes.LastIndexByte(p.partial, '\n')
	if i < 0 {
		return len(b), nil
	}
	if err := p.emit(p.partial[:i+1]); err != nil {
		return 0, err
	}
	p.partial = append(p.partial[:0], p.partial[i+1:]...)
	return len(b), nil
}

// Close writes a last line that has no newline.
func (p *prefixWriter) Close() error {
	if len(p.partial) == 0 {
		return nil
	}
	return p.emit(append(p.partial, '\n'))
}

func (p *prefixWriter) emit(lines []byte) error {
	var out bytes.Buffer
	for _, l := range bytes.SplitAfter(lines, []byte("\n")) {
		if len(l) > 0 {
			out.WriteString(p.prefix)
			out.Write(l)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.w.Write(out.Bytes())
	return err
}
