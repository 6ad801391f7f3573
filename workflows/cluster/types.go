// Package cluster is the long-lived workflow that owns one cluster: it
// brings node agents up and down through provisioners, tracks their health
// from heartbeats, hands out node resources to jobs and takes them back
// when a node dies. One workflow per cluster, id "cluster/<name>".
package cluster

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/internal/resources"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/workspec"
)

// Name is the workflow type.
const Name = "Cluster"

// Signal, query and update names.
const (
	SignalCommand   = "command"
	SignalHeartbeat = "heartbeat"
	SignalRelease   = "release"
	QueryStatus     = "status"
	// QueryStatusPacked answers the status gzipped (Packed): what the
	// control plane's own callers ask (QueryStatusOf).
	QueryStatusPacked = "status-packed"
	// QueryRefusal (arg: an agent id) answers the latest Refusal of that
	// agent's heartbeats, or nil: how an agent learns it is refused.
	QueryRefusal = "refusal"
	// QueryJoinKey answers the public half of the join token in force
	// (the API finds the token by it).
	QueryJoinKey   = "join-key"
	UpdateAllocate = "allocate"
	// UpdateJoinKeys adds or revokes a join token (JoinKeysRequest) by its
	// public half; it answers the cluster's tokens after the change.
	UpdateJoinKeys = "join-keys"
)

// JoinKeysRequest adds the public half of a fresh join token (Add, with a
// Name for people) or revokes one by its ID.
type JoinKeysRequest struct {
	Add    string `json:"add,omitempty"`
	Name   string `json:"name,omitempty"`
	Revoke string `json:"revoke,omitempty"`
}

// JoinKey is a join token the cluster accepts besides its own (the one
// `cluster up` made, which its local and SSH agents use): one per
// `cluster join-token` call, so each can be revoked on its own.
type JoinKey struct {
	ID     string    `json:"id" doc:"The first 12 hex digits of its public half: how it is revoked."`
	Public string    `json:"public" doc:"Its public half (an Ed25519 key): all the cluster keeps."`
	Name   string    `json:"name,omitempty"`
	Added  time.Time `json:"added"`
}

// JoinKeyStatus is a JoinKey and the nodes whose agents sign with it.
type JoinKeyStatus struct {
	JoinKey
	Nodes []string `json:"nodes,omitempty"`
}

// JoinKeyID names a public key in status and revocations.
func JoinKeyID(pub string) string { return pub[:min(12, len(pub))] }

// MaxJoinKeys bounds the tokens a cluster accepts besides its own.
const MaxJoinKeys = 64

// WorkflowID is the id of the cluster's workflow.
func WorkflowID(cluster string) string { return "cluster/" + cluster }

// NodeQueue is the task queue a node's agent polls.
func NodeQueue(cluster, node string) string { return "node/" + cluster + "/" + node }

// Settings are fixed for the life of the workflow.
type Settings struct {
	// HeartbeatTimeout turns a silent node Dead (default 15s); agents beat
	// every third of it.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
	// RegisterTimeout bounds how long `up` waits for a started agent's first
	// heartbeat (default 60s).
	RegisterTimeout time.Duration `json:"register_timeout"`
	// DrainTimeout bounds how long `down` waits for running work (default 2m).
	DrainTimeout time.Duration `json:"drain_timeout"`
	// JoinKey is the public half of the cluster's join token
	// (internal/joinkey): agents sign their heartbeats with the token, and
	// only this half is ever in the history.
	JoinKey string `json:"join_key,omitempty"`
	// JoinSecret is how workflows started before join keys compared
	// heartbeats (kept so their histories replay; never set now).
	JoinSecret string `json:"join_secret,omitempty"`
	// HistoryLimit is the history length at which the workflow continues as
	// new (default 4000, well before Temporal's limits: heartbeats add one
	// event per node every few seconds).
	HistoryLimit int `json:"history_limit,omitempty"`
}

func (s Settings) withDefaults() Settings {
	if s.HeartbeatTimeout <= 0 {
		s.HeartbeatTimeout = 15 * time.Second
	}
	if s.RegisterTimeout <= 0 {
		s.RegisterTimeout = 60 * time.Second
	}
	if s.DrainTimeout <= 0 {
		s.DrainTimeout = 2 * time.Minute
	}
	if s.HistoryLimit <= 0 {
		s.HistoryLimit = 4000
	}
	return s
}

// Op is what a command asks for.
type Op string

const (
	OpUp      Op = "up"
	OpDown    Op = "down"
	OpRestart Op = "restart"
	OpAdd     Op = "add-node"
	OpRemove  Op = "remove-node"
	// OpDrain: no new work on the node, and the runs on it checkpoint now
	// and move (Name, Deadline). OpUndrain lets it take work again.
	OpDrain   Op = "drain-node"
	OpUndrain Op = "undrain-node"
)

// Command is sent as SignalCommand.
type Command struct {
	Op   Op            `json:"op"`
	Spec *spec.Cluster `json:"spec,omitempty"` // up
	Node *spec.Node    `json:"node,omitempty"` // add-node
	Name string        `json:"name,omitempty"` // remove-node, drain-node, undrain-node
	// Deadline is how long a drained node's work has to checkpoint.
	Deadline time.Duration `json:"deadline,omitempty"`
}

// DrainRequest tells an agent to drain.
type DrainRequest struct {
	Reason   string    `json:"reason"`
	Deadline time.Time `json:"deadline"`
}

// Heartbeat is what an agent sends every few seconds.
type Heartbeat struct {
	Node    string `json:"node"`
	AgentID string `json:"agent_id"`
	// Seq grows with every heartbeat of a node (the agent's clock in ns);
	// Sig signs node, agent and Seq with the join token. A heartbeat whose
	// Seq is not above the last accepted one is a replay.
	Seq int64  `json:"seq,omitempty"`
	Sig string `json:"sig,omitempty"`
	// Secret is the legacy join secret (workflows started before join keys).
	Secret    string             `json:"secret,omitempty"`
	Resources resources.Capacity `json:"resources"`
	// GPUUtil is percent per GPU, -1 unknown, as of the last change the
	// agent reported: it reports a GPU going busy or idle (GPUBusyPct),
	// not each percent (those are its metrics).
	GPUUtil []int `json:"gpu_util,omitempty"`
	PID     int   `json:"pid"`
	// Draining says why the agent drains (a preemption notice, SIGTERM, a
	// drain request); empty while it takes work.
	Draining string `json:"draining,omitempty"`
	// Address is where the node's peers reach it (the agent's
	// --advertise-address: by default the source address of its route to
	// the control plane).
	Address string `json:"address,omitempty"`
}

// Release returns a job's allocation.
type Release struct {
	JobID string `json:"job_id"`
	// Also are more jobs released with it (a split gang given back whole).
	Also []string `json:"also,omitempty"`
}

// AllocateRequest asks for resources on one node.
type AllocateRequest struct {
	JobID string `json:"job_id"`
	// Owner is the workflow asking (set by the allocate activity).
	Owner    string   `json:"owner,omitempty"`
	CPUs     float64  `json:"cpus"`
	GPUs     int      `json:"gpus"`
	MemoryMB int64    `json:"memory_mb"`
	Exclude  []string `json:"exclude,omitempty"` // nodes that failed this job
	// GPUShare asks for part of one device instead of whole GPUs (0.25:
	// four such jobs share a GPU); GPUs must then be 0.
	GPUShare float64 `json:"gpu_share,omitempty"`
	// Params are the placement params of the policy bundle in force when
	// the request was made (data.trainyard.params: GPUs reserved for
	// inference, capacity share, provider preferences); the shipped
	// defaults when empty, as for requests recorded before this field.
	Params json.RawMessage `json:"params,omitempty"`
	// Work is the whole work description, placed all-or-nothing with its
	// kind, config, roles, groups and preferences; it waits in the
	// cluster's queue, ordered by priority and age. Requests recorded
	// before this field describe one "job" role with the fields above.
	Work *workspec.Spec `json:"work,omitempty"`
	// PolicyWait, when set, is why admission (with the live usage) makes
	// the work wait: it is queued with that reason and not placed.
	PolicyWait string `json:"policy_wait,omitempty"`
	// Split, for a gang placed all-or-nothing whose instances then live
	// apart (a distributed run's trainer and rollout workers), holds
	// each listed instance ("role#i") as a job of its own: released,
	// re-placed and counted in the ledger under that job and kind, so one
	// instance's loss gives back only its share.
	Split map[string]SplitJob `json:"split,omitempty"`
}

// SplitJob is the job one instance of a split gang is held as.
type SplitJob struct {
	JobID string `json:"job_id"`
	Kind  string `json:"kind"`
}

// InstanceKey names a role instance in AllocateRequest.Split.
func InstanceKey(role string, instance int) string { return fmt.Sprintf("%s#%d", role, instance) }

// Jobs are the job ids an allocation request holds: its own and its
// split instances', in a fixed order.
func (r AllocateRequest) Jobs() []string {
	out := []string{r.JobID}
	for _, k := range slices.Sorted(maps.Keys(r.Split)) {
		if id := r.Split[k].JobID; id != r.JobID {
			out = append(out, id)
		}
	}
	return out
}

// Assigned is one role instance's place.
type Assigned struct {
	Role     string `json:"role"`
	Instance int    `json:"instance"`
	Node     string `json:"node"`
	Queue    string `json:"queue"`
	GPUs     []int  `json:"gpus,omitempty"`
	// Address is where other instances reach the node: the address its
	// agent advertises, else the one in the cluster spec (empty for local
	// nodes of a workflow from before advertised addresses: this machine).
	Address string `json:"address,omitempty"`
}

// Allocation is where a job runs: Node, Queue and GPUs are its first
// (for one-role work, its only) instance's; Assignments list every role
// instance of a work placed from a work description.
type Allocation struct {
	Node        string     `json:"node"`
	Queue       string     `json:"queue"`
	GPUs        []int      `json:"gpus"`
	Assignments []Assigned `json:"assignments,omitempty"`
}

// Health of a node, as `ray status` shows it.
type Health string

const (
	Pending Health = "Pending" // starting, not registered yet
	Healthy Health = "Healthy" // heartbeating and running work
	Idle    Health = "Idle"    // heartbeating, no work
	Dead    Health = "Dead"    // no heartbeat within the timeout
	Stopped Health = "Stopped"
	Failed  Health = "Failed" // could not be started or never registered
)

// Usage is what jobs hold on a node.
type Usage struct {
	CPUs     float64 `json:"cpus"`
	MemoryMB int64   `json:"memory_mb"`
	GPUs     []int   `json:"gpus,omitempty" doc:"Devices in use (each once, also when shared)."`
	// GPUShare is, for one job, the part of its device it holds (0: its
	// devices whole).
	GPUShare float64 `json:"gpu_share,omitempty" doc:"A job's part of its one shared device (0: whole devices)."`
	// GPUParts is, for a node, the part of each device in GPUs that is
	// held; set only when some device is shared.
	GPUParts []scheduler.GPUShare `json:"gpu_parts,omitempty" doc:"How much of each device in gpus is held; only when some device is shared."`
	// Work, Role, Instance and Labels say what holds one allocation (set
	// for work placed from a work description): other work's anti-affinity
	// matches the labels.
	Work     string            `json:"work,omitempty" doc:"The work an allocation belongs to (one allocation only)."`
	Role     string            `json:"role,omitempty" doc:"Its role (one allocation only)."`
	Instance int               `json:"instance,omitempty" doc:"Its instance of the role (one allocation only)."`
	Labels   map[string]string `json:"labels,omitempty" doc:"Its labels: work, role, kind, config and the role's own (one allocation only)."`
	// Owner is the workflow that asked for it: once that workflow has
	// closed (terminated, timed out, failed, or ended without releasing)
	// the cluster takes the allocation back (reconcileOwners).
	Owner string `json:"owner,omitempty" doc:"The workflow holding it; released once that workflow has closed (one allocation only)."`
}

// shares is the scheduler's view of u's devices.
func (u Usage) shares() []scheduler.GPUShare {
	if len(u.GPUParts) > 0 {
		return u.GPUParts
	}
	share := u.GPUShare
	if share <= 0 {
		share = 1
	}
	out := make([]scheduler.GPUShare, 0, len(u.GPUs))
	for _, g := range u.GPUs {
		out = append(out, scheduler.GPUShare{Index: g, Share: share})
	}
	return out
}

// allocation is the scheduler's view of one allocation under key.
func (u Usage) allocation(key string) scheduler.Allocation {
	a := scheduler.Allocation{WorkID: key, Role: "job", Instance: u.Instance, CPUs: u.CPUs, MemoryMB: u.MemoryMB, GPUs: u.shares(), Labels: u.Labels}
	if u.Work != "" {
		a.WorkID, a.Role = u.Work, u.Role
	}
	return a
}

// NodeStatus is one node in the status query.
type NodeStatus struct {
	Name          string             `json:"name"`
	Provider      string             `json:"provider,omitempty"`
	Provisioner   string             `json:"provisioner"`
	Ephemeral     bool               `json:"ephemeral,omitempty"`
	Labels        map[string]string  `json:"labels,omitempty" doc:"The node's labels (node affinity matches them)."`
	Health        Health             `json:"health"`
	Error         string             `json:"error,omitempty"`
	Draining      bool               `json:"draining,omitempty"`
	DrainReason   string             `json:"drain_reason,omitempty" doc:"Why the node drains: a drain request, a preemption notice, SIGTERM."`
	Address       string             `json:"address,omitempty" doc:"Where peers reach the node (gangs' MASTER_ADDR, an LLM loop's trainer and pool): its agent's advertised address, else the spec's."`
	Resources     resources.Capacity `json:"resources" doc:"As reported by the agent (expected ones until it registers)."`
	GPUsDiffer    string             `json:"gpus_differ,omitempty" doc:"Set when the agent reports other GPUs than the spec describes: what each says."`
	Used          Usage              `json:"used"`
	GPUUtil       []int              `json:"gpu_util,omitempty"`
	LastHeartbeat *time.Time         `json:"last_heartbeat,omitempty" doc:"When the node's agent last reported a change (it registered, its resources, drain, address or busy GPUs changed). Its liveness between changes is its lease's: a node not Dead is live."`
	AgentPID      int                `json:"agent_pid,omitempty"`
	Jobs          []string           `json:"jobs,omitempty"`
	// Allocations are what holds the node, one per role instance, with
	// the labels anti-affinity matches (the feasibility check at
	// submission places against them like the workflow does).
	Allocations []scheduler.Allocation `json:"allocations,omitempty" doc:"What holds the node: one entry per role instance, with its labels."`
}

// Totals sum the cluster.
type Totals struct {
	Nodes        int            `json:"nodes"`
	ByHealth     map[Health]int `json:"by_health"`
	CPUs         float64        `json:"cpus"`
	CPUsUsed     float64        `json:"cpus_used"`
	MemoryMB     int64          `json:"memory_mb"`
	MemoryMBUsed int64          `json:"memory_mb_used"`
	GPUs         int            `json:"gpus"`
	GPUsUsed     int            `json:"gpus_used"`
}

// Status is the answer to QueryStatus.
type Status struct {
	Cluster string       `json:"cluster"`
	Desired string       `json:"desired" enum:"up,down"`
	Busy    bool         `json:"busy" doc:"An up, down or node change is in progress."`
	Nodes   []NodeStatus `json:"nodes"`
	Totals  Totals       `json:"totals"`
	Events  []string     `json:"events" doc:"The latest cluster events, oldest first."`
	// Endpoints are the spec's inference endpoints (definitions only: the
	// credentials stay references). Health is checked by whoever shows
	// them, outside the workflow.
	Endpoints []inference.Endpoint `json:"endpoints,omitempty" doc:"Inference endpoints the spec declares (docs/llm.md)."`
	// Ledger is the usage ledger's records (see GET /v1/usage for sums).
	Ledger []ledger.Entry `json:"ledger,omitempty" doc:"Usage records: which work held which node's GPUs, from when to when."`
	// LedgerFolded is the GPU time of records pruned beyond the ledger's
	// 2,000, by hour (the usage sums count it).
	LedgerFolded []ledger.Bucket `json:"ledger_folded,omitempty" doc:"GPU time of usage records pruned beyond the latest 2,000, summed by hour, config, kind, provider and node VRAM."`
	// Queue is the work waiting for a placement, in the order it is tried.
	Queue []QueueItem `json:"queue,omitempty" doc:"Work waiting for a placement, in scheduling order, each with its reason."`
	// Refused are agents whose heartbeats the cluster refuses (a missing
	// or wrong join token, an unknown node).
	Refused []Refusal `json:"refused,omitempty" doc:"Agents whose heartbeats are refused, newest last: node, agent, reason, how often."`
	// JoinKeys are the tokens `cluster join-token` added (not the
	// cluster's own), with the nodes whose agents sign with each.
	JoinKeys []JoinKeyStatus `json:"join_keys,omitempty" doc:"Join tokens added by cluster join-token (revocable), with the nodes using each."`
	// Now is the workflow's time of the answer (usage sums end there).
	Now time.Time `json:"now"`
	// AgeS is set by the API, never by the workflow: a status read that
	// accepted an older answer got the last one, this many seconds old.
	AgeS float64 `json:"age_s,omitempty" doc:"Set only when max_age_s let a busy cluster answer with its last status: its age in seconds."`
	// Cycle is the scheduling cycle's counts (nil before it).
	Cycle *CycleStats `json:"cycle,omitempty" doc:"The scheduling cycle: cycles, asks decided and placed this run, the latest batch, asks waiting."`
}

// QueueItem is one waiting work in the cluster's queue.
type QueueItem struct {
	WorkID            string    `json:"work_id"`
	Kind              string    `json:"kind"`
	Config            string    `json:"config,omitempty"`
	Priority          int       `json:"priority"`
	EffectivePriority int       `json:"effective_priority" doc:"Priority plus the starvation boost once it has waited past the policy's threshold."`
	Since             time.Time `json:"since"`
	WaitingSeconds    int64     `json:"waiting_seconds"`
	Reason            string    `json:"reason"`
	Policy            bool      `json:"policy,omitempty" doc:"Held by an admission rule on the live usage (quota, one training per config), not by capacity."`
	// Work is the queued work description (a policy dry-run decides it
	// again).
	Work QueuedWork `json:"work"`
}

// QueuedWork is a queued work description (its own name in the API's
// schema, where training runs have a Spec too).
type QueuedWork workspec.Spec

// waiting is a queued work as the workflow keeps it.
type waiting struct {
	Work   workspec.Spec `json:"work"`
	Since  time.Time     `json:"since"`
	Seen   time.Time     `json:"seen"` // the last request: work that stopped asking leaves the queue
	Reason string        `json:"reason"`
	Policy bool          `json:"policy,omitempty"`
}

// nodeState is the workflow's record of one node.
type nodeState struct {
	Spec     spec.Node        `json:"spec"`
	Handle   provision.Handle `json:"handle"`
	Health   Health           `json:"health"`
	Error    string           `json:"error,omitempty"`
	Draining bool             `json:"draining,omitempty"`
	// DrainReason: why (empty for a cluster going down).
	DrainReason string `json:"drain_reason,omitempty"`
	// Undrained is the reason of a drain an operator lifted, until the
	// agent says it heard: its beats sent before then still carry it.
	Undrained string             `json:"undrained,omitempty"`
	Reported  resources.Capacity `json:"reported"`
	// Address is the one its agent advertises (empty before it reports one).
	Address string `json:"address,omitempty"`
	GPUUtil []int  `json:"gpu_util,omitempty"`
	// RegisterBy: an agent started in a batch that has not registered by
	// then is stopped, and its node Failed (bringup.go).
	RegisterBy time.Time `json:"register_by,omitzero"`
	LastBeat   time.Time `json:"last_beat"`
	AgentID    string    `json:"agent_id,omitempty"`
	AgentPID   int       `json:"agent_pid,omitempty"`
	// LastSeq is the sequence number of the last heartbeat accepted.
	LastSeq int64 `json:"last_seq,omitempty"`
	// KeyID is the join token its agent signs with ("" for the cluster's own).
	KeyID string `json:"key_id,omitempty"`
	// NoLease: its agent holds no lease (an older one, or the cluster holds
	// maxLeases), so its heartbeat signals decide its health.
	NoLease bool `json:"no_lease,omitempty"`
	// LeaseGroup is the node-group workflow that holds its lease (from 1;
	// 0 before its first, leasegroup.go).
	LeaseGroup int              `json:"lease_group,omitzero"`
	Allocated  map[string]Usage `json:"allocated,omitempty"` // by job id map[string]Usage `json:"allocated,omitempty"` // by job id
}

// State is carried across continue-as-new.
type State struct {
	Name     string                `json:"name"`
	Settings Settings              `json:"settings"`
	Desired  string                `json:"desired"`
	Order    []string              `json:"order"` // node names in spec order
	Nodes    map[string]*nodeState `json:"nodes"`
	Events   []string              `json:"events"`
	Pending  []Command             `json:"pending,omitempty"` // commands not yet run
	// Endpoints: the latest spec's inference endpoints.
	Endpoints []inference.Endpoint `json:"endpoints,omitempty"`
	// Ledger is the usage ledger kept from allocations and releases.
	Ledger ledger.Book `json:"ledger,omitzero"`
	// Queue is waiting work by id (work descriptions only).
	Queue map[string]*waiting `json:"queue,omitempty"`
	// Refused are the latest agents whose heartbeats were refused, newest
	// last (at most maxRefused).
	Refused []Refusal `json:"refused,omitempty"`
	// JoinKeys are the tokens `cluster join-token` added, oldest first.
	JoinKeys []JoinKey `json:"join_keys,omitempty"`
}

// Refusal is an agent whose heartbeats the cluster refuses: a wrong or
// missing join token, an unknown node, a replay.
type Refusal struct {
	Node    string    `json:"node"`
	AgentID string    `json:"agent_id" doc:"The agent process (host and pid) that sent them."`
	PID     int       `json:"pid"`
	Reason  string    `json:"reason"`
	Count   int       `json:"count" doc:"Heartbeats refused so far."`
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
}

// maxRefused bounds State.Refused: a misconfigured fleet shows, a flood
// from one host cannot grow the state.
const maxRefused = 16

// SchedulerNodes is the scheduler's view of a status snapshot, for callers
// outside the workflow (admission, feasibility checks at submission).
func (s Status) SchedulerNodes() []scheduler.Node {
	nodes := make([]scheduler.Node, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		sn := scheduler.Node{Name: n.Name, Provider: n.Provider, Labels: n.Labels, Ephemeral: n.Ephemeral, Capacity: n.Resources}
		sn.InferenceGPUs = inferenceGPUs(s.Endpoints, n.Name, n.Resources.GPUs)
		switch {
		case n.Health != Healthy && n.Health != Idle:
			sn.Health = scheduler.Down
		case n.Draining:
			sn.Health = scheduler.Draining
		}
		if len(n.Allocations) > 0 {
			sn.Allocations = n.Allocations
		} else if n.Used.CPUs > 0 || n.Used.MemoryMB > 0 || len(n.Used.GPUs) > 0 {
			a := scheduler.Allocation{WorkID: "running", CPUs: n.Used.CPUs, MemoryMB: n.Used.MemoryMB, GPUs: n.Used.shares()}
			sn.Allocations = []scheduler.Allocation{a}
		}
		nodes = append(nodes, sn)
	}
	return nodes
}

func jobSpec(id string, cpus, gpus float64, memoryMB int64) workspec.Spec {
	return workspec.Spec{Name: id, Kind: workspec.KindJob, Roles: []workspec.Role{{Name: "job", Count: 1, CPUs: cpus, GPUs: gpus, MemoryMB: memoryMB}}}
}
