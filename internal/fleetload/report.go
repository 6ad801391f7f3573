package fleetload

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// row is one line of the table: a metric and how to read it off a result.
type row struct {
	name string
	get  func(*Result) string
}

func lat(l Latency) string {
	if l.Count == 0 {
		return "-"
	}
	s := fmt.Sprintf("%.0f / %.0f", l.P50MS, l.P99MS)
	if l.Errors > 0 {
		s += fmt.Sprintf(" (%d err)", l.Errors)
	}
	return s
}

func secs(l Latency) string {
	if l.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f / %.2f", l.P50MS/1000, l.P99MS/1000)
}

func mapStr(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

var rows = []row{
	{"agent processes (GPU nodes)", func(r *Result) string { return fmt.Sprintf("%d (%d)", r.AgentProcs, r.GPUNodes) }},
	{"join: all nodes up (s)", func(r *Result) string { return fmt.Sprintf("%.1f", r.JoinSeconds) }},
	{"health flaps (churn flaps, deaths)", func(r *Result) string {
		return fmt.Sprintf("%d (%d, %d)", r.Health.Flaps, r.Health.ChurnFlaps, r.Health.Deaths)
	}},
	{"jobs accepted / requested", func(r *Result) string { return fmt.Sprintf("%d / %d", r.Submit.Accepted, r.Submit.Requested) }},
	{"accepted/s", func(r *Result) string { return fmt.Sprintf("%.1f", r.Submit.AcceptedPerSec) }},
	{"HTTP 429 (other errors)", func(r *Result) string { return fmt.Sprintf("%d (%s)", r.Submit.Status429, mapStr(r.Submit.Errors)) }},
	{"submit p50 / p99 (ms)", func(r *Result) string { return lat(r.Submit.Latency) }},
	{"submit → placed p50 / p99 (s)", func(r *Result) string { return secs(r.Placement.Latency) }},
	{"placements/s (peak 10 s)", func(r *Result) string {
		return fmt.Sprintf("%.1f (%.1f)", r.Placement.PerSec, r.Placement.PeakPerSec)
	}},
	{"placed once / more / never; lost", func(r *Result) string {
		p := r.Placement
		return fmt.Sprintf("%d / %d / %d; %d", p.PlacedOnce, p.MultiPlaced, p.NeverPlaced, p.Lost)
	}},
	{"GET cluster status p50 / p99 (ms)", func(r *Result) string { return lat(r.API[routeStatus]) }},
	{"GET cluster status, as the CLI asks (max_age_s=10) p50 / p99 (ms)", func(r *Result) string { return lat(r.API[routeStatusCLI]) }},
	{"GET usage p50 / p99 (ms)", func(r *Result) string { return lat(r.API[routeUsage]) }},
	{"GET runs p50 / p99 (ms)", func(r *Result) string { return lat(r.API[routeRuns]) }},
	{"GET queue p50 / p99 (ms)", func(r *Result) string { return lat(r.API[routeQueue]) }},
	{"GET job p50 / p99 (ms)", func(r *Result) string { return lat(r.API[routeJob]) }},
	{"control plane CPU s (cores)", func(r *Result) string {
		return fmt.Sprintf("%.1f (%.2f)", r.ControlPlane.CPUSeconds, r.ControlPlane.CPUCores)
	}},
	{"control plane RSS max / end (MiB)", func(r *Result) string {
		return fmt.Sprintf("%.0f / %.0f", r.ControlPlane.RSSMaxMiB, r.ControlPlane.RSSEndMiB)
	}},
	{"Temporal DB growth (MiB)", func(r *Result) string { return fmt.Sprintf("%.1f", r.ControlPlane.DBGrowthMiB) }},
	{"cluster wf runs (continued as new)", func(r *Result) string {
		return fmt.Sprintf("%d (%d)", r.Workflow.Runs, r.Workflow.ContinuedAsNew)
	}},
	{"cluster wf events/min (max)", func(r *Result) string {
		if len(r.Workflow.PerMinute) == 0 { // under a minute: no whole one to take the max of
			return fmt.Sprintf("%.0f", r.Workflow.EventsPerMinute)
		}
		return fmt.Sprintf("%.0f (%d)", r.Workflow.EventsPerMinute, r.Workflow.MaxEventsPerMinute)
	}},
	{"heartbeat signals (per node-min)", func(r *Result) string {
		return fmt.Sprintf("%d (%.3f)", r.Workflow.HeartbeatSignals, r.Workflow.HeartbeatsPerNodeMinute)
	}},
	{"window (min)", func(r *Result) string { return fmt.Sprintf("%.1f", r.Workflow.WindowMinutes) }},
	{"problems", func(r *Result) string { return fmt.Sprintf("%d", len(r.Problems)) }},
}

// Table writes results as a markdown table, one column per size.
func Table(w io.Writer, results []*Result) {
	head := []string{"metric"}
	for _, r := range results {
		kind := "hollow"
		if r.RealAgents {
			kind = "real"
		}
		head = append(head, fmt.Sprintf("%d %s", r.Size, kind))
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, rw := range rows {
		cells := []string{rw.name}
		for _, r := range results {
			cells = append(cells, rw.get(r))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// WriteJSON writes results to path (indented), making its folder.
func WriteJSON(path string, results []*Result) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
