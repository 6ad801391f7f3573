package fleetload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	_ "github.com/trainyard/trainyard/internal/provision/static" // the spec's provisioner kind
	"github.com/trainyard/trainyard/internal/workspec"
)

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		n, every, parts int
		want            []group
	}{
		{100, 4, 1, []group{{"hollow", 1, 75, noGPUs}, {"hollow", 76, 25, gpuDesc}}},
		{3, 4, 1, []group{{"hollow", 1, 2, noGPUs}, {"hollow", 3, 1, gpuDesc}}},
		{5, 0, 1, []group{{"hollow", 1, 5, noGPUs}}},
		{10, 4, 2, []group{{"hollow", 1, 4, noGPUs}, {"hollow", 5, 3, noGPUs}, {"hollow", 8, 2, gpuDesc}, {"hollow", 10, 1, gpuDesc}}},
		{2, 0, 4, []group{{"hollow", 1, 1, noGPUs}, {"hollow", 2, 1, noGPUs}}},
	} {
		got := layout("hollow", tc.n, tc.every, tc.parts)
		if !slices.Equal(got, tc.want) {
			t.Errorf("layout(%d, %d, %d) = %v, want %v", tc.n, tc.every, tc.parts, got, tc.want)
		}
		var names []string
		for _, g := range got {
			names = append(names, g.nodes()...)
		}
		if len(names) != tc.n || names[0] != "hollow-1" || names[tc.n-1] != fmt.Sprintf("hollow-%d", tc.n) {
			t.Errorf("layout(%d, ...) names %v", tc.n, names)
		}
	}
}

// The spec is what `cluster up` takes: static nodes, each with the
// resources its agent will report.
func TestClusterSpecParses(t *testing.T) {
	groups := layout("hollow", 8, 4, 1)
	c, err := spec.Parse([]byte(clusterSpec("fleet", groups)))
	if err != nil {
		t.Fatalf("spec.Parse: %v\n%s", err, clusterSpec("fleet", groups))
	}
	if len(c.Nodes) != 8 || c.Nodes[0].Name != "hollow-1" || c.Nodes[7].Name != "hollow-8" {
		t.Fatalf("nodes %+v", c.Nodes)
	}
	for _, n := range c.Nodes {
		if n.Provisioner.Kind != "static" || n.Resources.CPUs != nodeCPUs || n.Resources.MemoryMB != nodeMemoryMB {
			t.Errorf("node %s: %+v %+v", n.Name, n.Provisioner, n.Resources)
		}
		wantGPUs := 0
		if n.Name == "hollow-7" || n.Name == "hollow-8" {
			wantGPUs = gpusPerNode
		}
		if len(n.Resources.GPUs) != wantGPUs {
			t.Errorf("node %s has %d GPUs, want %d", n.Name, len(n.Resources.GPUs), wantGPUs)
		}
	}
}

// Every drawn job is a valid work description of POST /v1/jobs, with the
// whole mix present.
func TestMixIsValidWork(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	kinds := map[string]int{}
	for range 2000 {
		j := mix(r, "fleet", 0, time.Second, true)
		kinds[j.Kind]++
		b, _ := json.Marshal(j.Body)
		var in struct {
			Cluster string `json:"cluster"`
			workspec.Spec
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		in.Name = "job-1"
		in.ApplyDefaults()
		if err := in.Validate(); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if j.Duration < 0 || j.Duration > time.Second {
			t.Fatalf("duration %v", j.Duration)
		}
		if r := in.Roles[0]; j.Kind == "gang" && (r.Count < 2 || r.Count > 8) {
			t.Fatalf("gang of %d", r.Count)
		}
	}
	for _, k := range []string{"cpu", "gang", "gpu-share", "gpu"} {
		if kinds[k] == 0 {
			t.Errorf("no %s job in 2000: %v", k, kinds)
		}
	}
	if j := mix(r, "fleet", 0, time.Second, false); j.Kind == "gpu" || j.Kind == "gpu-share" {
		t.Errorf("GPU job drawn for a fleet without GPUs")
	}
}

func TestCommand(t *testing.T) {
	if got := command(1500*time.Millisecond, 0); strings.Join(got, " ") != "sleep 1.5" {
		t.Errorf("command = %q", got)
	}
	if got := command(2*time.Second, 3); len(got) != 3 || got[2] != "sleep 2; exit 3" {
		t.Errorf("command = %q", got)
	}
}

func TestParseEnv(t *testing.T) {
	out := "# trainyard agent of cluster fleet (join token abc): it joins nodes, keep it 0600\n" +
		"TRAINYARD_CLUSTER=fleet\nTRAINYARD_TEMPORAL_ADDRESS=127.0.0.1:7233\nTRAINYARD_JOIN_SECRET='a b'\\''c'\n"
	env, err := parseEnv(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"TRAINYARD_CLUSTER=fleet", "TRAINYARD_TEMPORAL_ADDRESS=127.0.0.1:7233", "TRAINYARD_JOIN_SECRET=a b'c"}
	if strings.Join(env, "\n") != strings.Join(want, "\n") {
		t.Errorf("parseEnv = %q, want %q", env, want)
	}
	if _, err := parseEnv("TRAINYARD_CLUSTER=fleet\n"); err == nil {
		t.Error("an env without a join token was taken")
	}
}

func TestParseStat(t *testing.T) {
	line := "4242 (trainyard (dev) x) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 10 5 20 0 12 0 1000 2000000 300 18446744073709551615\n"
	s, ok := parseStat([]byte(line))
	if !ok || s.ppid != 17 || s.ticks != 315 {
		t.Errorf("parseStat = %+v, %v; want ppid 17, 315 ticks", s, ok)
	}
	all := map[int]procStat{1: {ppid: 0}, 2: {ppid: 1}, 3: {ppid: 2}, 4: {ppid: 1}, 5: {ppid: 9}}
	if got := descendants(all, 2); len(got) != 2 {
		t.Errorf("descendants(2) = %v", got)
	}
}

func TestPercentilesAndRates(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	l := summarize(d, 2)
	if l.P50MS != 50 || l.P99MS != 99 || l.MaxMS != 100 || l.Count != 100 || l.Errors != 2 {
		t.Errorf("summarize = %+v", l)
	}
	t0 := time.Now()
	var times []time.Time
	for i := range 20 {
		times = append(times, t0.Add(time.Duration(i)*100*time.Millisecond)) // 10/s for 2 s
	}
	times = append(times, t0.Add(time.Minute))
	if got := peakRate(times, time.Second); got != 10 {
		t.Errorf("peakRate = %v, want 10", got)
	}
	if got := spanRate(times); got < 0.34 || got > 0.36 {
		t.Errorf("spanRate = %v, want 21/60", got)
	}
}

// A flap is up, Dead, up again; a node that joins late or dies for good
// is not one.
func TestWatcherFlaps(t *testing.T) {
	w := newWatcher(nil, "fleet", []string{"a", "b", "c"}, 0)
	seq := [][3]string{
		{"Pending", "Pending", "Idle"},
		{"Idle", "Pending", "Idle"},
		{"Idle", "Idle", "Healthy"},
		{"Dead", "Idle", "Dead"},
		{"Healthy", "Idle", "Dead"},
	}
	for i, s := range seq {
		st := clusterStatus{}
		for j, h := range s {
			st.Nodes = append(st.Nodes, nodeStatus{Name: string(rune('a' + j)), Health: h})
		}
		w.observe(time.Unix(int64(i), 0), st)
	}
	h := w.health()
	if h.Flaps != 1 || len(h.FlapNodes) != 1 || h.FlapNodes[0] != "a" || h.Deaths != 2 {
		t.Errorf("health = %+v, want one flap (a) and two deaths", h)
	}
	if !w.upSince().Equal(time.Unix(2, 0)) {
		t.Errorf("all up at %v, want the third poll", w.upSince())
	}
}

func TestSummarizePlacements(t *testing.T) {
	t0 := time.Now()
	rec := func(exit, placements int, status, failure string) jobRecord {
		return jobRecord{sub: submitted{ID: "j", Sent: t0, Spec: jobSpec{Kind: "cpu", Exit: exit}}, closed: status != "running",
			status: status, failure: failure, started: t0, placed: t0.Add(time.Second), placements: placements}
	}
	p := summarizePlacements([]jobRecord{
		rec(0, 1, "completed", ""),
		rec(3, 1, "failed", "activity error: sh exited with code 3: "),
		rec(0, 2, "completed", ""),
		rec(0, 0, "running", ""),
		rec(0, 1, "failed", "boom"),
	})
	if p.PlacedOnce != 3 || p.MultiPlaced != 1 || p.NeverPlaced != 0 || p.Ended != 4 || p.Lost != 1 || p.WrongOutcome != 1 {
		t.Errorf("placements = %+v", p)
	}
	if p.Latency.P50MS != 1000 || p.ByKind["cpu"].Count != 4 {
		t.Errorf("latency %+v by kind %+v", p.Latency, p.ByKind)
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	Table(&b, []*Result{{Size: 3, RealAgents: true, API: map[string]Latency{}}, {Size: 100, API: map[string]Latency{routeStatus: {Count: 1, P50MS: 3, P99MS: 9}}}})
	out := b.String()
	for _, want := range []string{"| metric | 3 real | 100 hollow |", "| GET cluster status p50 / p99 (ms) | - | 3 / 9 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
