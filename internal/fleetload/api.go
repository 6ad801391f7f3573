package fleetload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The cluster workflow's names, as workflows/cluster defines them
// (internal/ may not import workflows/: internal/e2e's fleet test checks
// that these still match).
const (
	// ClusterWorkflowPrefix + name is cluster.WorkflowID(name).
	ClusterWorkflowPrefix = "cluster/"
	// HeartbeatSignal is cluster.SignalHeartbeat.
	HeartbeatSignal = "heartbeat"
)

// Activity names of the job workflow (workflows/job): a placement is a
// completed Allocate, a process on a node a RunProcess.
const (
	allocateActivity = "Allocate"
	runActivity      = "RunProcess"
)

// requestTimeout bounds one API call: the API gives up on a busy cluster
// workflow after 30 s itself (a 429), so a call twice as long means the
// control plane stopped answering.
const requestTimeout = time.Minute

// apiClient calls the Trainyard API with the dev admin token. It does not
// retry: the load counts every 429 itself.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func newAPIClient(base, token string) *apiClient {
	// Many submitters at once: keep a connection per goroutine alive.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	return &apiClient{base: base, token: token, http: &http.Client{Timeout: requestTimeout, Transport: tr}}
}

// apiError is an answer other than 2xx.
type apiError struct {
	Status     int
	RetryAfter time.Duration
	Body       string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// call sends body as JSON (nil: none) and decodes a 2xx answer into out
// (nil: discarded).
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: encode: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Status: resp.StatusCode, Body: string(raw)}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// clusterStatus is the part of GET /v1/clusters/{name} (cluster.Status)
// the load reads.
type clusterStatus struct {
	Busy   bool         `json:"busy"`
	Nodes  []nodeStatus `json:"nodes"`
	Totals struct {
		Nodes        int            `json:"nodes"`
		ByHealth     map[string]int `json:"by_health"`
		CPUsUsed     float64        `json:"cpus_used"`
		MemoryMBUsed int64          `json:"memory_mb_used"`
		GPUsUsed     int            `json:"gpus_used"`
	} `json:"totals"`
	Queue []struct {
		WorkID string `json:"work_id"`
		Reason string `json:"reason"`
	} `json:"queue"`
}

type nodeStatus struct {
	Name   string `json:"name"`
	Health string `json:"health"`
	Used   struct {
		CPUs     float64 `json:"cpus"`
		MemoryMB int64   `json:"memory_mb"`
		GPUs     []int   `json:"gpus"`
	} `json:"used"`
	Jobs        []string          `json:"jobs"`
	Allocations []json.RawMessage `json:"allocations"`
}

// up: heartbeating, running work or not.
func (n nodeStatus) up() bool { return n.Health == "Healthy" || n.Health == "Idle" }

// held counts what still holds resources on the cluster's nodes.
func (s clusterStatus) held() (allocations int, jobs int) {
	for _, n := range s.Nodes {
		allocations += len(n.Allocations)
		jobs += len(n.Jobs)
	}
	return allocations, jobs
}

// clusterQueue is GET /v1/clusters/{name}/queue.
type clusterQueue struct {
	Waiting []json.RawMessage `json:"waiting"`
	Running int               `json:"running"`
}

// workflowRef is POST /v1/jobs's answer.
type workflowRef struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
}
