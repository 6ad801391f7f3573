package fleetload

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Result is one size's measurements. Times are seconds and milliseconds,
// sizes MiB, so the JSON reads without units.
type Result struct {
	Size        int       `json:"size"`
	GPUNodes    int       `json:"gpu_nodes"`
	AgentProcs  int       `json:"agent_processes"`
	RealAgents  bool      `json:"real_agents"`
	DevBinary   string    `json:"dev_binary"`
	AgentBinary string    `json:"agent_binary"`
	Started     time.Time `json:"started"`
	WallSeconds float64   `json:"wall_seconds"`

	// JoinSeconds is from the agents' start until every node was Healthy
	// or Idle in the cluster's status (-1: not within the join timeout).
	JoinSeconds float64   `json:"join_seconds"`
	Health      Health    `json:"health"`
	Submit      Submit    `json:"submit"`
	Placement   Placement `json:"placement"`
	// API is each route's latency, sampled every poll while the load ran
	// (POST /v1/jobs: every submission).
	API          map[string]Latency `json:"api"`
	ControlPlane ControlPlane       `json:"control_plane"`
	Workflow     Workflow           `json:"cluster_workflow"`
	End          End                `json:"end"`
	// Problems are what went wrong: the correctness test fails on them.
	Problems []string `json:"problems,omitempty"`
}

// Health is what the status polls saw of the nodes.
type Health struct {
	// Flaps: a node seen up, then Dead, then up again, churned nodes not
	// counted (their flaps are ChurnFlaps).
	Flaps      int      `json:"flaps"`
	FlapNodes  []string `json:"flap_nodes,omitempty"`
	ChurnFlaps int      `json:"churn_flaps"`
	Deaths     int      `json:"deaths"`
	Churns     int      `json:"churns"`
}

// Submit sums POST /v1/jobs.
type Submit struct {
	Requested      int            `json:"requested"`
	Accepted       int            `json:"accepted"`
	AcceptedPerSec float64        `json:"accepted_per_sec"`
	Seconds        float64        `json:"seconds"`
	Status429      int            `json:"status_429"`
	Errors         map[string]int `json:"errors,omitempty"`
	FirstErrors    []string       `json:"first_errors,omitempty"`
	Latency        Latency        `json:"latency"`
	// Stopped: the load gave up, the control plane failing every POST.
	Stopped bool `json:"stopped,omitempty"`
}

// Placement sums the accepted jobs' histories.
type Placement struct {
	Placed      int `json:"placed"`
	PlacedOnce  int `json:"placed_once"`
	MultiPlaced int `json:"placed_more_than_once"`
	// MultiPlacedJobs are some of them, each with why its process was
	// lost (the RunProcess activity's timeout or failure).
	MultiPlacedJobs []string       `json:"placed_more_than_once_jobs,omitempty"`
	NeverPlaced     int            `json:"never_placed"`
	Ended           int            `json:"ended"`
	Lost            int            `json:"lost"`
	LostJobs        []string       `json:"lost_jobs,omitempty"`
	Outcomes        map[string]int `json:"outcomes"`
	// WrongOutcome: completed though its command exits non-zero, or
	// failed though it exits 0.
	WrongOutcome int `json:"wrong_outcome"`
	// Latency is from the POST that was accepted to the first placement
	// (client and server share this machine's clock); Server from the
	// job workflow's start.
	Latency Latency            `json:"latency"`
	Server  Latency            `json:"server_latency"`
	ByKind  map[string]Latency `json:"by_kind"`
	// PerSec is placements over the span from the first to the last;
	// PeakPerSec the most in any 10 s.
	PerSec     float64 `json:"per_sec"`
	PeakPerSec float64 `json:"peak_per_sec"`
}

// ControlPlane is `trainyard dev` (and any children), from /proc.
type ControlPlane struct {
	// CPUSeconds is user+system time from the agents' start to the end.
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUCores is CPUSeconds over that window: cores busy on average.
	CPUCores    float64 `json:"cpu_cores"`
	RSSMaxMiB   float64 `json:"rss_max_mib"`
	RSSEndMiB   float64 `json:"rss_end_mib"`
	DBStartMiB  float64 `json:"temporal_db_start_mib"`
	DBEndMiB    float64 `json:"temporal_db_end_mib"`
	DBGrowthMiB float64 `json:"temporal_db_growth_mib"`
}

// Workflow is the cluster workflow's history, every run.
type Workflow struct {
	Runs           int `json:"runs"`
	RunsListed     int `json:"runs_listed"`
	ContinuedAsNew int `json:"continued_as_new"`
	Events         int `json:"events"`
	EventsInWindow int `json:"events_in_window"`
	// WindowMinutes: from the agents' start to the end of the load.
	WindowMinutes      float64        `json:"window_minutes"`
	EventsPerMinute    float64        `json:"events_per_minute"`
	MaxEventsPerMinute int            `json:"max_events_per_minute"`
	PerMinute          []int          `json:"per_minute"`
	Signals            map[string]int `json:"signals"`
	Updates            map[string]int `json:"updates"`
	Activities         map[string]int `json:"activities"`
	// HeartbeatSignals counts the heartbeat signals of every run;
	// HeartbeatsPerNodeMinute those in the window per node and minute.
	HeartbeatSignals         int     `json:"heartbeat_signals"`
	HeartbeatSignalsInWindow int     `json:"heartbeat_signals_in_window"`
	HeartbeatsPerNodeMinute  float64 `json:"heartbeats_per_node_minute"`
}

// End is the cluster once every job ended: nothing should hold it.
type End struct {
	Allocations int     `json:"allocations"`
	Jobs        int     `json:"jobs"`
	Queue       int     `json:"queue"`
	CPUsUsed    float64 `json:"cpus_used"`
	GPUsUsed    int     `json:"gpus_used"`
	Up          int     `json:"nodes_up"`
}

// clean: nothing holds the cluster.
func (e End) clean() bool {
	return e.Allocations == 0 && e.Jobs == 0 && e.Queue == 0 && e.CPUsUsed == 0 && e.GPUsUsed == 0
}

// summarizePlacements sums the jobs' records.
func summarizePlacements(recs []jobRecord) Placement {
	p := Placement{Outcomes: map[string]int{}, ByKind: map[string]Latency{}}
	var lat, server []time.Duration
	byKind := map[string][]time.Duration{}
	var placedAt []time.Time
	for _, r := range recs {
		p.Outcomes[r.status]++
		switch {
		case r.placements == 1:
			p.PlacedOnce++
		case r.placements > 1:
			p.MultiPlaced++
			if len(p.MultiPlacedJobs) < 20 {
				p.MultiPlacedJobs = append(p.MultiPlacedJobs, fmt.Sprintf("%s (%d placements; %s)", r.sub.ID, r.placements, r.lostRun))
			}
		case r.closed:
			p.NeverPlaced++
		}
		if r.placements > 0 {
			p.Placed++
			d := r.placed.Sub(r.sub.Sent)
			lat = append(lat, d)
			server = append(server, r.placed.Sub(r.started))
			byKind[r.sub.Spec.Kind] = append(byKind[r.sub.Spec.Kind], d)
			placedAt = append(placedAt, r.placed)
		}
		if r.closed && (r.status == "completed" || r.status == "failed") {
			p.Ended++
		} else {
			p.Lost++
			p.LostJobs = append(p.LostJobs, r.sub.ID+" ("+r.status+")")
		}
		if wrongOutcome(r) {
			p.WrongOutcome++
		}
	}
	slices.Sort(p.LostJobs)
	if len(p.LostJobs) > 20 {
		p.LostJobs = p.LostJobs[:20]
	}
	p.Latency, p.Server = summarize(lat, 0), summarize(server, 0)
	for k, d := range byKind {
		p.ByKind[k] = summarize(d, 0)
	}
	p.PerSec = round1(spanRate(placedAt))
	p.PeakPerSec = round1(peakRate(placedAt, 10*time.Second))
	return p
}

// wrongOutcome: a closed job that ended otherwise than its command does.
func wrongOutcome(r jobRecord) bool {
	switch r.status {
	case "completed":
		return r.sub.Spec.Exit != 0
	case "failed":
		return r.sub.Spec.Exit == 0 || !strings.Contains(r.failure, "code")
	}
	return false
}
