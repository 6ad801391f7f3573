package e2e

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/pythontest"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// readEventsPy reads every TensorBoard event file in a directory with
// Google's protobuf runtime (Debian's python3-protobuf; TensorBoard itself
// is not needed): it checks the TFRecord framing and both masked CRC32Cs
// with its own CRC32C, decodes each record as a tensorflow.Event built at
// run time from its .proto field numbers, checks that protobuf encodes the
// decoded event to the very same bytes, and prints
// {"steps": {step: {tag: value}}, "wall_times": {step: t}, "versions": [...]}.
// A step in two files is an error.
const readEventsPy = `
import glob, json, os, struct, sys
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

F = descriptor_pb2.FieldDescriptorProto
fd = descriptor_pb2.FileDescriptorProto(name="event.proto", package="tensorflow", syntax="proto3")
ev = fd.message_type.add(name="Event")
ev.oneof_decl.add(name="what")
ev.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
ev.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
ev.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
ev.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, type_name=".tensorflow.Summary", label=F.LABEL_OPTIONAL, oneof_index=0)
sm = fd.message_type.add(name="Summary")
sm.field.add(name="value", number=1, type=F.TYPE_MESSAGE, type_name=".tensorflow.Summary.Value", label=F.LABEL_REPEATED)
val = sm.nested_type.add(name="Value")
val.oneof_decl.add(name="value")
val.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
val.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL, oneof_index=0)
pool = descriptor_pool.DescriptorPool()
pool.Add(fd)
desc = pool.FindMessageTypeByName("tensorflow.Event")
Event = message_factory.GetMessageClass(desc) if hasattr(message_factory, "GetMessageClass") else message_factory.MessageFactory(pool).GetPrototype(desc)

out = {"steps": {}, "wall_times": {}, "versions": []}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*tfevents*"))):
    b = open(path, "rb").read()
    off, n = 0, 0
    while off < len(b):
        (length,) = struct.unpack("<Q", b[off:off + 8])
        (lcrc,) = struct.unpack("<I", b[off + 8:off + 12])
        assert lcrc == masked(b[off:off + 8]), (path, n, "length crc")
        data = b[off + 12:off + 12 + length]
        (dcrc,) = struct.unpack("<I", b[off + 12 + length:off + 16 + length])
        assert len(data) == length and dcrc == masked(data), (path, n, "data crc")
        e = Event()
        e.ParseFromString(data)
        assert e.SerializeToString() == data, (path, n, "re-encoded bytes differ")
        if n == 0:
            out["versions"].append(e.file_version)
        else:
            assert e.WhichOneof("what") == "summary", (path, n)
            s = str(e.step)
            assert s not in out["steps"], (path, "step twice", s)
            out["steps"][s] = {v.tag: v.simple_value for v in e.summary.value}
            out["wall_times"][s] = e.wall_time
        off += 16 + length
        n += 1
print(json.dumps(out))
`

// episodic are the metrics a run writes only for iterations in which an
// episode finished.
var episodic = map[string]bool{"episode_return_mean": true, "episode_return_min": true, "episode_return_max": true, "episode_length_mean": true}

// TestCurves: a CartPole run writes its per-iteration metrics as
// TensorBoard event files and a CSV in S3; `run tensorboard` downloads
// them, Google's protobuf runtime decodes them (CRCs checked) to exactly
// the run's metrics from `run show -o json` (as 32-bit floats), and `run
// scalars` serves the same curves as JSON and as CSV (full precision). A
// command trainer's TRAINYARD_SCALAR lines land in the same place and in
// `run show`.
func TestCurves(t *testing.T) {
	t.Parallel()
	dev := sweepLab(t)
	t.Run("a run's event files, read by protobuf", func(t *testing.T) { ppoCurves(t, dev) })
	t.Run("a command trainer's scalar lines", func(t *testing.T) { commandCurves(t, dev) })
}

func ppoCurves(t *testing.T, dev *devProc) {
	pythontest.Require(t, "TRAINYARD_REQUIRE_PROTOBUF", "tensorboard-protobuf", "google.protobuf")
	start := time.Now()
	id := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--env", "CartPole-v1", "--iterations", "6", "--checkpoint-every", "3", "--seed", "3", "--detach"))
	waitRun(t, dev, id, 3*time.Minute, func(r runView) bool { return r.Status != "running" })
	var doc runDoc
	if err := json.Unmarshal([]byte(cli(t, dev, "run", "show", id, "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Progress.Metrics) != 6 {
		t.Fatalf("run %s: %d iterations of metrics, want 6", id, len(doc.Progress.Metrics))
	}

	dir := t.TempDir()
	if out := cli(t, dev, "run", "tensorboard", id, "-d", dir); !strings.Contains(out, "3 files in") {
		t.Fatalf("run tensorboard: %q, want two event files (one per segment) and metrics.csv", out)
	}
	py := exec.Command(pythontest.Python, "-c", readEventsPy, filepath.Join(dir, id))
	var stderr bytes.Buffer
	py.Stderr = &stderr
	raw, err := py.Output()
	if err != nil {
		t.Fatalf("python reader: %v\n%s", err, stderr.String())
	}
	var got struct {
		Steps     map[string]map[string]float64 `json:"steps"`
		WallTimes map[string]float64            `json:"wall_times"`
		Versions  []string                      `json:"versions"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("python output %s: %v", raw, err)
	}
	if len(got.Versions) != 2 || got.Versions[0] != "brain.Event:2" || got.Versions[1] != "brain.Event:2" {
		t.Fatalf("file versions %q, want brain.Event:2 first in each of 2 files", got.Versions)
	}
	if len(got.Steps) != 6 {
		t.Fatalf("event files hold steps %v, want 1..6", got.Steps)
	}
	var fromJSON struct {
		Tags map[string][]struct {
			Step     int64   `json:"step"`
			WallTime float64 `json:"wall_time"`
			Value    float64 `json:"value"`
		} `json:"tags"`
	}
	if err := json.Unmarshal([]byte(cli(t, dev, "run", "scalars", id, "-o", "json")), &fromJSON); err != nil {
		t.Fatal(err)
	}
	served := map[string]float64{} // "tag@step" → value
	for tag, ps := range fromJSON.Tags {
		for _, p := range ps {
			served[tag+"@"+strconv.FormatInt(p.Step, 10)] = p.Value
		}
	}
	compared := 0
	for _, m := range doc.Progress.Metrics {
		step := strconv.FormatInt(int64(m["iteration"].(float64)), 10)
		ev, ok := got.Steps[step]
		if !ok {
			t.Fatalf("no event for iteration %s", step)
		}
		if wt := got.WallTimes[step]; wt < float64(start.Unix())-1 || wt > float64(time.Now().Unix())+1 {
			t.Errorf("iteration %s: wall time %v is not during the run", step, wt)
		}
		for tag, v := range m {
			f, isNum := v.(float64)
			if tag == "iteration" || !isNum {
				continue
			}
			gotV, ok := ev[tag]
			if episodic[tag] && m["episodes"].(float64) == 0 {
				if ok {
					t.Errorf("iteration %s: %s written though no episode finished", step, tag)
				}
				continue
			}
			want := float64(float32(f))
			if !ok || gotV != want {
				t.Errorf("iteration %s %s: event file %v (present %v), run show %v", step, tag, gotV, ok, f)
			}
			if s := served[tag+"@"+step]; s != f {
				t.Errorf("iteration %s %s: run scalars %v, run show %v", step, tag, s, f)
			}
			compared++
		}
	}
	if compared < 6*15 {
		t.Fatalf("compared only %d values", compared)
	}

	// CSV: one row per iteration, full precision.
	rows, err := csv.NewReader(strings.NewReader(cli(t, dev, "run", "scalars", id, "-o", "csv"))).ReadAll()
	if err != nil || len(rows) != 7 || rows[0][0] != "step" || rows[0][1] != "wall_time" {
		t.Fatalf("run scalars -o csv: %d rows, header %v, %v", len(rows), rows[0], err)
	}
	for i, m := range doc.Progress.Metrics {
		for j, tag := range rows[0][2:] {
			cell := rows[i+1][j+2]
			if cell == "" {
				continue
			}
			v, _ := strconv.ParseFloat(cell, 64)
			if want, _ := m[tag].(float64); v != want && !(math.IsNaN(v) && math.IsNaN(want)) {
				t.Errorf("CSV row %d %s: %s, run show %v", i+1, tag, cell, m[tag])
			}
		}
	}

	// An unknown run is a 404 problem, not an empty curve.
	if code, _, raw := dev.call(http.MethodGet, "/v1/runs/run-nope/scalars", dev.admin, nil, nil); code != http.StatusNotFound || !strings.Contains(string(raw), "not found") {
		t.Fatalf("scalars of an unknown run: %d %s", code, raw)
	}
	if code, _, raw := dev.call(http.MethodGet, "/v1/runs/"+id+"/tensorboard/..%2Fsecret", dev.admin, nil, nil); code != http.StatusNotFound {
		t.Fatalf("a file outside the curves: %d %s", code, raw)
	}
}

// checkLoopCurves: a finished loop's curves hold one step per generation
// with what the loop recorded for it, through the API and the CLI.
func checkLoopCurves(t *testing.T, dev *devProc, loop string, gens []selfplay.Generation) {
	t.Helper()
	var sc api.Scalars
	if code, _, raw := dev.call(http.MethodGet, "/v1/selfplay/"+loop+"/scalars", dev.admin, nil, &sc); code != http.StatusOK {
		t.Fatalf("loop curves: %d %s", code, raw)
	}
	for _, c := range []struct {
		tag string
		get func(selfplay.Generation) float64
	}{
		{"games", func(g selfplay.Generation) float64 { return float64(g.Games) }},
		{"quality/score", func(g selfplay.Generation) float64 { return g.Quality.Score }},
		{"train_loss", func(g selfplay.Generation) float64 { return g.TrainLoss }},
		{"elo", func(g selfplay.Generation) float64 { return g.Elo }},
	} {
		ps := sc.Tags[c.tag]
		if len(ps) != len(gens) {
			t.Fatalf("loop curve %s: %+v, want one point per generation of %d", c.tag, ps, len(gens))
		}
		for i, g := range gens {
			if ps[i].Step != int64(g.N) || ps[i].Value != c.get(g) || ps[i].WallTime != float64(g.Ended.UnixNano())/1e9 {
				t.Errorf("loop curve %s step %d: %+v, generation %d has %v, ended %v", c.tag, i, ps[i], g.N, c.get(g), g.Ended)
			}
		}
	}
	if out := cli(t, dev, "selfplay", "scalars", loop, "-o", "csv"); strings.Count(out, "\n") != len(gens)+1 || !strings.HasPrefix(out, "step,wall_time,games,") {
		t.Fatalf("selfplay scalars -o csv: %q", out)
	}
	if out := cli(t, dev, "selfplay", "tensorboard", loop, "-d", t.TempDir()); !strings.Contains(out, fmt.Sprintf("%d files in", len(gens)+1)) {
		t.Fatalf("selfplay tensorboard: %q", out)
	}
}

// commandCurves: a command trainer's TRAINYARD_SCALAR lines (a logger's
// prefix allowed, a step's tags over several lines) become its curves;
// malformed ones are named in its output.
func commandCurves(t *testing.T, dev *devProc) {
	script := `for i in 1 2 3; do echo "TRAINYARD_SCALAR step=$i tag=loss value=0.$i"; done
echo "INFO train.py: TRAINYARD_SCALAR step=3 tag=eval/return value=412.5"
echo "TRAINYARD_SCALAR step=x tag=loss value=1"`
	id := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--detach", "--", "sh", "-c", script))
	waitRun(t, dev, id, 2*time.Minute, func(r runView) bool { return r.Status != "running" })
	var fromJSON api.Scalars
	if err := json.Unmarshal([]byte(cli(t, dev, "run", "scalars", id, "-o", "json")), &fromJSON); err != nil {
		t.Fatal(err)
	}
	loss, eval := fromJSON.Tags["loss"], fromJSON.Tags["eval/return"]
	if len(fromJSON.Tags) != 2 || len(loss) != 3 || loss[2].Step != 3 || loss[2].Value != 0.3 || len(eval) != 1 || eval[0].Step != 3 || eval[0].Value != 412.5 {
		t.Fatalf("command run's curves: %+v", fromJSON.Tags)
	}
	if csv := cli(t, dev, "run", "scalars", id, "-o", "csv"); !strings.HasPrefix(csv, "step,wall_time,loss,eval/return\n") || strings.Count(csv, "\n") != 4 {
		t.Fatalf("run scalars -o csv:\n%s", csv)
	}
	if show := cli(t, dev, "run", "show", id); !strings.Contains(show, "scalar eval/return") || !strings.Contains(show, "412.5 (step 3)") {
		t.Fatalf("run show of a command run:\n%s", show)
	}
	var shown struct {
		Progress struct {
			Output string `json:"output"`
		} `json:"progress"`
	}
	if err := json.Unmarshal([]byte(cli(t, dev, "run", "show", id, "-o", "json")), &shown); err != nil {
		t.Fatal(err)
	}
	if want := `trainyard: TRAINYARD_SCALAR line ignored: "TRAINYARD_SCALAR step=x tag=loss value=1": step "x": want an integer ≥ 0`; !strings.Contains(shown.Progress.Output, want) {
		t.Fatalf("a malformed scalar line: output %q lacks %q", shown.Progress.Output, want)
	}
}
