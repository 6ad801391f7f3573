package main

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/policy"
)

func newPolicyCmd() *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{Use: "policy", Short: "Review and change admission policies as code (Rego)"}
	addClientFlags(cmd, cf)

	// send loads the bundle in dir and sends it to the API.
	send := func(cmd *cobra.Command, dir, method, path string, out any) error {
		b, err := policy.LoadDir(dir)
		if err != nil {
			return err
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		return c.JSON(cmd.Context(), method, path, b, out)
	}

	test := &cobra.Command{
		Use: "test DIR", Short: "Run a bundle's Rego unit tests on the server", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Passed  int                 `json:"passed"`
				Failed  int                 `json:"failed"`
				Results []policy.TestResult `json:"results"`
			}
			if err := send(cmd, args[0], http.MethodPost, "/v1/policies/test", &out); err != nil {
				return err
			}
			if err := cf.print(os.Stdout, out, func(w *tabwriter.Writer) {
				for _, r := range out.Results {
					state := "PASS"
					if !r.Pass {
						state = "FAIL " + r.Error
					}
					fmt.Fprintf(w, "%s\t%s\t%s\n", r.Package, r.Name, state)
				}
				fmt.Fprintf(w, "%d passed, %d failed\n", out.Passed, out.Failed)
			}); err != nil {
				return err
			}
			if out.Failed > 0 {
				return fmt.Errorf("%d policy test(s) failed", out.Failed)
			}
			return nil
		},
	}

	var dryCluster string
	dry := &cobra.Command{
		Use: "dry-run DIR [--cluster NAME]", Short: "Show which recent submissions (and, with --cluster, which queued work on today's usage) a bundle would decide differently, and why", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Revision  string          `json:"revision"`
				Evaluated int             `json:"evaluated"`
				Changes   []policy.Change `json:"changes"`
			}
			path := "/v1/policies/dry-run"
			if dryCluster != "" {
				path += "?cluster=" + url.QueryEscape(dryCluster)
			}
			if err := send(cmd, args[0], http.MethodPost, path, &out); err != nil {
				return err
			}
			return cf.print(os.Stdout, out, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "revision %s: %d of %d recent submissions change\n", out.Revision, len(out.Changes), out.Evaluated)
				for _, ch := range out.Changes {
					fmt.Fprintf(w, "%s\t%s → %s\n", ch.WorkID, verdict(ch.Before), verdict(ch.After))
					for _, v := range ch.Added {
						fmt.Fprintf(w, "\t+ %s: %s\n", v.Rule, v.Reason)
					}
					for _, v := range ch.Removed {
						fmt.Fprintf(w, "\t- %s: %s\n", v.Rule, v.Reason)
					}
				}
			})
		},
	}

	dry.Flags().StringVar(&dryCluster, "cluster", "", "also decide this cluster's queued work on its live usage")

	push := &cobra.Command{
		Use: "push DIR", Short: "Replace the bundle in force (refused unless it compiles and its tests pass)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Revision  string `json:"revision"`
				Tests     int    `json:"tests"`
				Evaluator string `json:"evaluator"`
			}
			if err := send(cmd, args[0], http.MethodPut, "/v1/policies", &out); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "policies %s in force (%d tests passed; evaluated by %s)\n", out.Revision, out.Tests, out.Evaluator)
			return nil
		},
	}

	decisions := &cobra.Command{
		Use: "decisions", Short: "Recent admission decisions with every violated rule", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var out struct {
				Decisions []policy.LogEntry `json:"decisions"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/admission/decisions", nil, &out); err != nil {
				return err
			}
			return cf.print(os.Stdout, out.Decisions, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "SEQ\tTIME\tWORK\tRESULT\tREVISION\tREASONS")
				for _, d := range out.Decisions {
					res := "allow"
					if !d.Allow {
						res = "deny"
					}
					reasons := ""
					for _, v := range d.Violations {
						reasons += v.Rule + ": " + v.Reason + "; "
					}
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", d.Seq, d.Time.Local().Format("15:04:05"), d.WorkID, res, d.Revision, reasons)
				}
			})
		},
	}
	show := &cobra.Command{
		Use: "show", Short: "The bundle in force: its revision, what evaluates it, its modules", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var out struct {
				Revision  string        `json:"revision"`
				Evaluator string        `json:"evaluator"`
				Bundle    policy.Bundle `json:"bundle"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/policies", nil, &out); err != nil {
				return err
			}
			return cf.print(os.Stdout, out, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "revision\t%s\nevaluator\t%s\n", out.Revision, out.Evaluator)
				paths := slices.Sorted(maps.Keys(out.Bundle.Modules))
				for _, p := range paths {
					fmt.Fprintf(w, "module\t%s\n", p)
				}
			})
		},
	}
	cmd.AddCommand(show, test, dry, push, decisions)
	return cmd
}

func verdict(d policy.Decision) string {
	if d.Allow {
		return "allow"
	}
	return "deny"
}
