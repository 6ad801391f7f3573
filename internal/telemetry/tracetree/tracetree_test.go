package tracetree

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/worker"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/admission"
	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/embedded"
	"github.com/trainyard/trainyard/internal/embedded/temporaltest"
	"github.com/trainyard/trainyard/internal/joinkey"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/internal/provision/static"
	"github.com/trainyard/trainyard/internal/resources"
	"github.com/trainyard/trainyard/internal/telemetry"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/pluginrun"
	"github.com/trainyard/trainyard/workflows/train"
)

// The cluster: one operator-run (static) node whose agent is a worker in
// this process.
const clusterSpec = `
name: lab
nodes:
  - name: n1
    provider: local
    provisioner: {kind: static}
    resources: {cpus: 2, memory: 4GiB, gpus: none}
`

// A short CartPole run: two segments of one iteration, so the second
// continues in memory, then the final evaluation.
const runSpec = `{"cluster":"lab","env":"CartPole-v1","iterations":2,"checkpoint_every":1,"seed":1,
	"envs_per_worker":4,"episode_length":64,"batch_size":64,"hyperparameters":{"epochs":2}}`

// TestTrainingRunIsOneTrace submits a CartPole run over the API and checks
// that every span of its trace hangs off the API request, with the
// Temporal interceptor's spans linking the workflow to its activities and
// the agent's segment, plugin-load and checkpoint spans under those. It
// also checks that the run's training and checkpoint metrics are on
// /metrics.
func TestTrainingRunIsOneTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Temporal, S3 and trains: not in -short")
	}
	// Before S3 starts: versitygw's posix backend chdirs into its root.
	cartpole := plugintest.BuildGo(t, "./plugins/cartpole")

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tel, err := telemetry.Setup(ctx, "tracetree-test") // Prometheus metrics, W3C propagation
	if err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))

	dir := t.TempDir()
	creds, err := embedded.LoadOrCreateS3Credentials(filepath.Join(dir, "s3-credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	s3, err := embedded.StartS3("127.0.0.1", 0, filepath.Join(dir, "s3"), creds)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Stop()
	// The one way every trainyard process dials Temporal: the tracing
	// interceptor comes with it, and workers inherit it from the client.
	tc := temporaltest.Start(t, map[string]enumspb.IndexedValueType{pluginrun.SearchAttribute.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST})
	store, err := objstore.Open(ctx, objstore.Config{Endpoint: s3.Endpoint, Bucket: "trainyard", Insecure: true,
		AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())

	// The control-plane worker; the static provisioner starts nothing,
	// Launch hands us the join token for the agent below.
	secrets := make(chan string, 4)
	control := worker.New(tc, workflows.ControlTaskQueue, worker.Options{Identity: "control@test"})
	workflows.Register(control, workflows.Deps{Store: store, Plugins: rt, Client: tc, Identity: "control@test",
		Provisioners: provision.Set{static.Kind: static.New()},
		Launch: func(_ string, _ spec.Node, secret string, _ time.Duration) provision.AgentLaunch {
			select {
			case secrets <- secret:
			default:
			}
			return provision.AgentLaunch{}
		}})
	if err := control.Start(); err != nil {
		t.Fatal(err)
	}
	defer control.Stop()

	// The node's agent: a worker on its own queue training with real S3
	// checkpoints (what `trainyard agent` registers for training).
	agent := worker.New(tc, cluster.NodeQueue("lab", "n1"), worker.Options{Identity: "agent@n1"})
	agent.RegisterActivity(&train.AgentActivities{Dir: dir, Runner: &training.Runner{
		Plugins: rt, Store: pluginstore.New(store), Checkpoints: checkpoint.New(store, checkpoint.Options{})}})
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer agent.Stop()

	tokens, err := auth.Open(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	admin, _, err := tokens.Create("admin", auth.Admin)
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admission.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Deps{Temporal: tc, Namespace: "default", Tokens: tokens, Store: store,
		Plugins: rt, PluginStore: pluginstore.New(store), Admission: adm, Metrics: tel.Metrics}).Handler())
	defer srv.Close()
	call := func(method, path, contentType string, body []byte, out any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				t.Fatalf("%s %s: %v in %s", method, path, err, raw)
			}
		}
	}

	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("module", "cartpole.wasm")
	_, _ = fw.Write(cartpole)
	_ = mw.Close()
	call("POST", "/v1/plugins", mw.FormDataContentType(), form.Bytes(), nil)
	call("POST", "/v1/clusters?heartbeat_timeout=60s", "application/yaml", []byte(clusterSpec), nil)
	var secret string
	select {
	case secret = <-secrets:
	case <-ctx.Done():
		t.Fatal("the cluster never asked for node n1's agent")
	}
	token, err := joinkey.Parse(secret)
	if err != nil {
		t.Fatal(err)
	}
	go func() { // the agent's heartbeats, signed as `trainyard agent` signs them
		hb := cluster.Heartbeat{Node: "n1", AgentID: "test-agent", PID: os.Getpid(),
			Resources: resources.Capacity{CPUs: 2, MemoryMB: 4096}}
		for ctx.Err() == nil {
			hb.Seq = time.Now().UnixNano()
			hb.Sig = token.Sign(hb.Node, hb.AgentID, hb.Seq)
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_ = tc.SignalWorkflow(sctx, cluster.WorkflowID("lab"), "", cluster.SignalHeartbeat, hb)
			cancel()
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	waitFor(t, ctx, "node n1 to register", func() bool {
		v, err := tc.QueryWorkflow(ctx, cluster.WorkflowID("lab"), "", cluster.QueryStatus)
		var st cluster.Status
		if err != nil || v.Get(&st) != nil {
			return false
		}
		return len(st.Nodes) == 1 && st.Nodes[0].Health == cluster.Idle && !st.Busy
	})

	var ref struct {
		ID string `json:"id"`
	}
	call("POST", "/v1/runs", "application/json", []byte(runSpec), &ref)
	var progress train.RunProgress
	if err := tc.GetWorkflow(ctx, ref.ID, "").Get(ctx, &progress); err != nil {
		t.Fatalf("run %s: %v", ref.ID, err)
	}
	if progress.State != "succeeded" || progress.Iteration != 2 || progress.Checkpoint != 2 {
		t.Fatalf("run %s ended %s at iteration %d, checkpoint %d: %s", ref.ID, progress.State, progress.Iteration, progress.Checkpoint, progress.Reason)
	}

	// The run's trace is the one whose root is the POST /v1/runs request.
	// Wait for the workflow's own span to end and for no span to be
	// missing its parent (spans end after their children).
	var tr *tree
	waitFor(t, ctx, "the run's trace to be complete", func() bool {
		tr = runTrace(spans.Ended(), "POST /v1/runs")
		return tr != nil && len(tr.named(train.SpanSegment)) == 2 && len(tr.named("RunWorkflow:"+train.Name)) > 0 && len(tr.orphans()) == 0
	})
	t.Logf("trace %s:\n%s", tr.root.SpanContext().TraceID(), tr.render())

	if tr.root.Parent().IsValid() {
		t.Errorf("root %q has a parent", tr.root.Name())
	}
	// Every span of the trace named child hangs off a span named parent.
	for _, link := range [][2]string{
		{"POST /v1/runs", "StartWorkflow:" + train.Name},
		{"StartWorkflow:" + train.Name, "RunWorkflow:" + train.Name},
		{"RunWorkflow:" + train.Name, "StartActivity:Allocate"},
		{"StartActivity:Allocate", "RunActivity:Allocate"},
		{"RunWorkflow:" + train.Name, "StartActivity:RunSegment"},
		{"StartActivity:RunSegment", "RunActivity:RunSegment"},
		{"RunActivity:RunSegment", train.SpanSegment},
		{train.SpanSegment, checkpoint.SpanSave},
		{train.SpanSegment, pluginhost.SpanLoad},
		{train.SpanSegment, pluginhost.SpanSteps},
	} {
		kids := tr.named(link[1])
		if len(kids) == 0 {
			t.Errorf("no %s span in the trace", link[1])
		}
		for _, k := range kids {
			if p := tr.parent(k); p == nil || p.Name() != link[0] {
				t.Errorf("%s's parent is %v, want %s", link[1], nameOf(p), link[0])
			}
		}
	}
	// Two segments, each checkpointed once; only the first loaded the
	// plugin (the second continued in memory).
	segs := tr.named(train.SpanSegment)
	if len(segs) != 2 {
		t.Fatalf("%d segment spans, want 2", len(segs))
	}
	slices.SortFunc(segs, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	for i, s := range segs {
		saves, loads := tr.childrenNamed(s, checkpoint.SpanSave), tr.childrenNamed(s, pluginhost.SpanLoad)
		wantLoads := 0
		if i == 0 {
			wantLoads = 1 // the env plugin
		}
		if len(saves) != 1 || len(loads) != wantLoads {
			t.Errorf("segment %d: %d checkpoint saves and %d plugin loads, want 1 and %d", i+1, len(saves), len(loads), wantLoads)
		}
		// The iteration's plugin calls: one summed span at their real times,
		// inside the segment, or before it when the iteration was trained
		// ahead (while the previous segment's checkpoint uploaded).
		if steps := tr.childrenNamed(s, pluginhost.SpanSteps); len(steps) != 1 {
			t.Errorf("segment %d: %d %s spans, want 1 (one iteration)", i+1, len(steps), pluginhost.SpanSteps)
		} else if sa := attrs(steps[0]); sa["trainyard.training.iteration"] != fmt.Sprint(i+1) || sa[string(pluginhost.AttrCalls)] == "0" ||
			sa[string(pluginhost.AttrEnvSteps)] == "0" || (steps[0].StartTime().Before(s.StartTime()) && sa["trainyard.training.ahead"] != "true") ||
			(i > 0 && steps[0].StartTime().Before(segs[i-1].StartTime())) || steps[0].EndTime().After(s.EndTime()) {
			t.Errorf("segment %d: %s span %v (%v..%v) outside the segment (%v..%v) or empty", i+1, pluginhost.SpanSteps, sa,
				steps[0].StartTime(), steps[0].EndTime(), s.StartTime(), s.EndTime())
		}
		a := attrs(s)
		if a[string(train.AttrRun)] != ref.ID || a[string(train.AttrNode)] != "n1" ||
			a[string(train.AttrFromIteration)] != fmt.Sprint(i) || a[string(train.AttrToIteration)] != fmt.Sprint(i+1) {
			t.Errorf("segment %d attributes: %v", i+1, a)
		}
		if len(saves) == 1 {
			if sa := attrs(saves[0]); sa[string(checkpoint.AttrSeq)] != fmt.Sprint(i+1) || sa[string(checkpoint.AttrBytes)] == "0" {
				t.Errorf("segment %d checkpoint save attributes: %v", i+1, sa)
			}
		}
	}

	// The run's metrics on the API's /metrics.
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"trainyard_training_iterations_total", "trainyard_training_timesteps_total", "trainyard_training_episode_return_mean",
		"trainyard_training_env_steps_per_second", "trainyard_training_policy_loss", "trainyard_training_value_loss",
		"trainyard_training_approx_kl", "trainyard_training_entropy",
	} {
		if !hasSample(string(text), want, `run_id="`+ref.ID+`"`) {
			t.Errorf("/metrics has no %s sample for run %s", want, ref.ID)
		}
	}
	for _, want := range []string{"trainyard_checkpoint_saved_bytes_total", "trainyard_checkpoint_uploaded_bytes_total", "trainyard_checkpoint_save_duration_seconds_count"} {
		if !hasSample(string(text), want, "") {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if !hasSample(string(text), "trainyard_training_iterations_total", `run_id="`+ref.ID+`"} 2`) {
		t.Errorf("iterations of run %s on /metrics are not 2", ref.ID)
	}
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func hasSample(text, metric, contains string) bool {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, metric+"{") && strings.Contains(line, contains) {
			return true
		}
	}
	return false
}

// tree is one trace's ended spans.
type tree struct {
	root  sdktrace.ReadOnlySpan
	spans []sdktrace.ReadOnlySpan
	byID  map[trace.SpanID]sdktrace.ReadOnlySpan
}

// runTrace returns the trace of the first ended span named rootName.
func runTrace(ended []sdktrace.ReadOnlySpan, rootName string) *tree {
	var tr *tree
	for _, s := range ended {
		if s.Name() == rootName {
			tr = &tree{root: s, byID: map[trace.SpanID]sdktrace.ReadOnlySpan{}}
			break
		}
	}
	if tr == nil {
		return nil
	}
	for _, s := range ended {
		if s.SpanContext().TraceID() == tr.root.SpanContext().TraceID() {
			tr.spans = append(tr.spans, s)
			tr.byID[s.SpanContext().SpanID()] = s
		}
	}
	return tr
}

func (tr *tree) parent(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	return tr.byID[s.Parent().SpanID()]
}

// orphans are spans of the trace other than the root whose parent is not
// (yet) among the ended spans.
func (tr *tree) orphans() []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.spans {
		if s != tr.root && tr.parent(s) == nil {
			out = append(out, s)
		}
	}
	return out
}

func (tr *tree) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func (tr *tree) childrenNamed(p sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.spans {
		if s.Name() == name && s.Parent().SpanID() == p.SpanContext().SpanID() {
			out = append(out, s)
		}
	}
	return out
}

// render draws the tree, children in start order.
func (tr *tree) render() string {
	kids := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	for _, s := range tr.spans {
		kids[s.Parent().SpanID()] = append(kids[s.Parent().SpanID()], s)
	}
	var b strings.Builder
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth), s.Name())
		cs := kids[s.SpanContext().SpanID()]
		slices.SortFunc(cs, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
		for _, c := range cs {
			walk(c, depth+1)
		}
	}
	walk(tr.root, 0)
	return b.String()
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

func nameOf(s sdktrace.ReadOnlySpan) string {
	if s == nil {
		return "<none>"
	}
	return s.Name()
}
