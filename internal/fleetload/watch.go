package fleetload

import (
	"context"
	"math/rand/v2"
	"net/url"
	"slices"
	"sync"
	"time"
)

// nodeWatch is what the poller has seen of one node.
type nodeWatch struct {
	seenUp bool // Healthy or Idle at least once
	down   bool // Dead since it was last up
	flaps  int  // up, Dead, up again
	deaths int  // up, then Dead
}

// watcher polls the cluster's status every few seconds: node health (how
// long until all are up, and flaps: a node seen up, then Dead, then up
// again), the status route's latency under load, and dev's memory.
type watcher struct {
	api     *apiClient
	cluster string
	nodes   []string
	devPID  int

	mu      sync.Mutex
	seen    map[string]*nodeWatch
	churned map[string]bool // nodes whose agent the churn killed: their flaps are expected
	allUp   time.Time
	last    clusterStatus
	lastOK  bool
	maxRSS  int64
	lat     samples
}

func newWatcher(api *apiClient, cluster string, nodes []string, devPID int) *watcher {
	w := &watcher{api: api, cluster: cluster, nodes: nodes, devPID: devPID, seen: map[string]*nodeWatch{}, churned: map[string]bool{}}
	for _, n := range nodes {
		w.seen[n] = &nodeWatch{}
	}
	return w
}

// poll fetches and records one status; false when it failed.
func (w *watcher) poll(ctx context.Context) bool {
	var st clusterStatus
	t0 := time.Now()
	err := w.api.call(ctx, "GET", "/v1/clusters/"+url.PathEscape(w.cluster), nil, &st)
	if ctx.Err() != nil {
		return false // cancelled at the end: not a sample
	}
	w.lat.add(time.Since(t0), err != nil)
	w.sampleRSS()
	if err != nil {
		return false
	}
	w.observe(time.Now(), st)
	return true
}

// observe updates each node's record from one status.
func (w *watcher) observe(at time.Time, st clusterStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last, w.lastOK = st, true
	up := 0
	for _, n := range st.Nodes {
		nw := w.seen[n.Name]
		if nw == nil {
			continue // not ours
		}
		switch {
		case n.up():
			up++
			if nw.down {
				nw.flaps++
			}
			nw.seenUp, nw.down = true, false
		case n.Health == "Dead" && nw.seenUp && !nw.down:
			nw.down = true
			nw.deaths++
		}
	}
	if up == len(w.nodes) && w.allUp.IsZero() {
		w.allUp = at
	}
}

func (w *watcher) sampleRSS() {
	if u, err := usageOf(w.devPID); err == nil {
		w.mu.Lock()
		w.maxRSS = max(w.maxRSS, u.RSSBytes)
		w.mu.Unlock()
	}
}

// markChurned notes nodes whose agent the churn stops.
func (w *watcher) markChurned(nodes []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range nodes {
		w.churned[n] = true
	}
}

// run polls every d until ctx ends.
func (w *watcher) run(ctx context.Context, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		w.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// waitAllUp polls every 500 ms until every node is Healthy or Idle (true)
// or timeout passes, the agents die or ctx ends (false).
func (w *watcher) waitAllUp(ctx context.Context, timeout time.Duration, agentsDied func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil && !agentsDied() {
		w.poll(ctx)
		if w.upSince() != (time.Time{}) {
			return true
		}
		sleep(ctx, 500*time.Millisecond)
	}
	return false
}

func (w *watcher) upSince() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.allUp
}

// health sums the records: unexpected flaps (and their nodes), flaps of
// churned nodes, and deaths.
func (w *watcher) health() Health {
	w.mu.Lock()
	defer w.mu.Unlock()
	var h Health
	for _, n := range w.nodes {
		nw := w.seen[n]
		h.Deaths += nw.deaths
		if w.churned[n] {
			h.ChurnFlaps += nw.flaps
			continue
		}
		h.Flaps += nw.flaps
		if nw.flaps > 0 {
			h.FlapNodes = append(h.FlapNodes, n)
		}
	}
	slices.Sort(h.FlapNodes)
	return h
}

// latest is the last status polled (false if none was).
func (w *watcher) latest() (clusterStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.lastOK
}

// sampler times the other read routes people use while the load runs:
// usage (`trainyard usage`), runs (`trainyard run ls`), the cluster's
// queue and one job (`trainyard job status`).
type sampler struct {
	api     *apiClient
	cluster string
	jobIDs  func() []string
	routes  map[string]*samples
}

// Route names in Result.API.
const (
	routeStatus = "GET /v1/clusters/{name}"
	// routeStatusCLI is the status as `trainyard cluster status` asks
	// for it: a busy cluster's last answer if it is at most 10 s old.
	routeStatusCLI = "GET /v1/clusters/{name}?max_age_s=10"
	routeUsage     = "GET /v1/usage"
	routeRuns      = "GET /v1/runs"
	routeQueue     = "GET /v1/clusters/{name}/queue"
	routeJob       = "GET /v1/jobs/{id}"
	routeSubmit    = "POST /v1/jobs"
)

func newSampler(api *apiClient, cluster string, jobIDs func() []string) *sampler {
	s := &sampler{api: api, cluster: cluster, jobIDs: jobIDs, routes: map[string]*samples{}}
	for _, r := range []string{routeStatusCLI, routeUsage, routeRuns, routeQueue, routeJob} {
		s.routes[r] = &samples{}
	}
	return s
}

func (s *sampler) run(ctx context.Context, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		s.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// once calls each route one after the other, as one person would.
func (s *sampler) once(ctx context.Context) {
	c := url.PathEscape(s.cluster)
	paths := map[string]string{
		routeStatusCLI: "/v1/clusters/" + c + "?max_age_s=10",
		routeUsage:     "/v1/usage?cluster=" + url.QueryEscape(s.cluster),
		routeRuns:      "/v1/runs?limit=50",
		routeQueue:     "/v1/clusters/" + c + "/queue",
	}
	if ids := s.jobIDs(); len(ids) > 0 {
		paths[routeJob] = "/v1/jobs/" + url.PathEscape(ids[rand.IntN(len(ids))])
	}
	for route, path := range paths {
		t0 := time.Now()
		err := s.api.call(ctx, "GET", path, nil, nil)
		if ctx.Err() != nil {
			return // cancelled at the end: not a sample
		}
		s.routes[route].add(time.Since(t0), err != nil)
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
