package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/internal/provision/provisiontest"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// ephemeralSpec: two CPU-only local agents marked ephemeral (the seed's
// Vast.ai nodes), so self-play can move when one is killed.
const ephemeralSpec = `
name: lab
defaults:
  provider: local
  provisioner: {kind: local}
  ephemeral: true
nodes:
  - {name: node-a}
  - {name: node-b}
`

const (
	// evalGames is the fixed number of gauntlet games against each
	// opponent; the latest model must score at least minRandomScore of
	// them against uniform-random play.
	evalGames      = 20
	minRandomScore = 0.8
)

func getLoop(t *testing.T, dev *devProc, id string) api.Selfplay {
	t.Helper()
	var sp api.Selfplay
	if code, _, raw := dev.call("GET", "/v1/selfplay/"+id, dev.admin, nil, &sp); code != 200 {
		t.Fatalf("get loop %s: %d %s", id, code, raw)
	}
	return sp
}

func waitLoop(t *testing.T, dev *devProc, id string, limit time.Duration, cond func(api.Selfplay) bool) api.Selfplay {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		sp := getLoop(t, dev, id)
		if cond(sp) {
			return sp
		}
		if sp.Status != "running" {
			t.Fatalf("loop %s ended %s before the awaited state: %s (phase %s: %s)", id, sp.Status, sp.Error, sp.State.Phase, sp.State.Reason)
		}
		if time.Now().After(deadline) {
			var attempts []int
			for _, g := range sp.State.Generations {
				attempts = append(attempts, g.Attempts)
			}
			t.Fatalf("loop %s not in the awaited state after %v: phase %s (%s) on %s, generation %d, attempts %v, %d failures, %d drains, live %+v",
				id, limit, sp.State.Phase, sp.State.Reason, sp.State.Node, sp.State.Generation, attempts, sp.State.Failures, sp.State.Drains, sp.Live)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// selfplayDev starts `trainyard dev`, a two-node ephemeral cluster and
// uploads the square8_2p game plugin.
func selfplayDev(t *testing.T) (*devProc, string) {
	wasm := plugintest.BuildGo(t, "./plugins/kinrow/square8_2p")
	dir := t.TempDir()
	dev := startDev(t, dir)
	out := cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", ephemeralSpec), "--heartbeat-timeout", "5s")
	if !strings.Contains(out, "TOTAL (2 nodes") {
		t.Fatalf("cluster up: %s", out)
	}
	t.Cleanup(func() { killAgentsOf(dir) })
	var rec struct {
		ID string `json:"id"`
	}
	if code, raw := upload(t, dev, dev.admin, wasm, &rec); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, raw)
	}
	return dev, dir
}

// TestSelfplayLoop is issue 7's must-show on the real binary: a
// square8_2p loop started over the API runs 3 generations unattended
// (self-play → quality gate → NPZ export → training → gauntlet → Elo →
// promotion) and its latest model beats the random baseline by a clear
// margin over a fixed number of games; the exports load with NumPy; the
// leaderboard and the CLI show the same ratings.
func TestSelfplayLoop(t *testing.T) {
	t.Parallel()
	dev, _ := selfplayDev(t)

	t.Run("bad requests", func(t *testing.T) {
		for _, tc := range []struct {
			body string
			code int
			loc  string
		}{
			{`{"cluster":"lab","config":"square8_2p","settings":{"games_per_generation":10,"quality":{"min_games":20}}}`, 422, "body.settings.games_per_generation"},
			{`{"cluster":"lab","config":"square8_2p","settings":{"games_per_generation":30,"bootstrap_games":10,"quality":{"min_games":20}}}`, 422, "body.settings.bootstrap_games"},
			{`{"cluster":"lab","config":"square8_2p","settings":{"eval_games":3}}`, 422, "body.settings.eval_games"},
			{`{"cluster":"lab","config":"square8_2p","settings":{"search":"beam"}}`, 422, "body.settings.search"},
			{`{"cluster":"lab","config":"hex8_3p","game":"no-such-game"}`, 422, "body.game"},
			{`{"cluster":"nope","config":"square8_2p"}`, 404, ""},
		} {
			code, hdr, raw := dev.call("POST", "/v1/selfplay", dev.admin, tc.body, nil)
			assertProblem(t, code, hdr, raw, tc.code, tc.loc)
		}
	})

	start := time.Now()
	body := fmt.Sprintf(`{"cluster":"lab","config":"square8_2p","settings":{"generations":3,"games_per_generation":300,"bootstrap_games":450,"simulations":32,
		"eval_games":%d,"sync_interval":1000000000,"seed":7,"quality":{"min_games":300}}}`, evalGames)
	var sp api.Selfplay
	if code, _, raw := dev.call("POST", "/v1/selfplay", dev.admin, body, &sp); code != http.StatusCreated {
		t.Fatalf("start loop: %d %s", code, raw)
	}
	if code, hdr, raw := dev.call("POST", "/v1/selfplay", dev.admin, body, nil); code != http.StatusConflict {
		assertProblem(t, code, hdr, raw, http.StatusConflict, "")
	}
	id := "lab/square8_2p"
	sp = waitLoop(t, dev, id, 8*time.Minute, func(sp api.Selfplay) bool { return sp.Status != "running" })
	t.Logf("3 generations in %v", time.Since(start).Round(time.Second))
	recordHistory(t, dev, "selfplay/"+id, "history.json")
	if sp.Status != "completed" || sp.State.Phase != "finished" || sp.State.Completed != 3 || len(sp.State.Generations) != 3 {
		t.Fatalf("loop: status %s phase %s (%s), %d completed, error %s", sp.Status, sp.State.Phase, sp.State.Reason, sp.State.Completed, sp.Error)
	}
	s3 := s3Client(t, dev, "")
	for _, g := range sp.State.Generations {
		t.Logf("generation %d: %s, %d games by %s, quality %.2f (%d clean, %d decisive), %d positions, candidate %s (loss %.3f), Elo %.0f, gauntlet %+v",
			g.N, g.State, g.Games, g.Players, g.Quality.Score, g.Quality.Clean, g.Quality.Decisive, g.Positions, g.Model, g.TrainLoss, g.Elo, g.Gauntlet)
		games := 300
		if g.N == 1 {
			games = 450 // bootstrap_games: the heuristic's generation
		}
		if g.State == "rejected" || g.Games != games || !g.Quality.Passed || g.Dataset == "" || g.Model == "" || len(g.Gauntlet) < 2 {
			t.Fatalf("generation %d did not go through the whole pipeline: %+v", g.N, g)
		}
		checkExport(t, dev, s3, g.Dataset, g.Positions)
	}
	if sp.State.Best == "" || sp.State.Generations[0].Players != "heuristic" || !strings.HasPrefix(sp.State.Generations[2].Players, "mcts:") {
		t.Fatalf("best %q, players %q then %q: later generations must play with the best model", sp.State.Best, sp.State.Generations[0].Players, sp.State.Generations[2].Players)
	}

	checkLoopCurves(t, dev, id, sp.State.Generations)

	// The latest model against uniform-random play: a fixed number of
	// games, a clear margin.
	last := sp.State.Generations[2]
	var vsRandom *selfplay.GauntletScore
	for i, r := range last.Gauntlet {
		if r.Opponent == "random" {
			vsRandom = &last.Gauntlet[i]
		}
	}
	if vsRandom == nil || vsRandom.Wins+vsRandom.Draws+vsRandom.Losses != evalGames {
		t.Fatalf("latest model %s: no %d-game result against random: %+v", last.Model, evalGames, last.Gauntlet)
	}
	t.Logf("latest model %s vs random: %d-%d-%d (score %.2f)", last.Model, vsRandom.Wins, vsRandom.Draws, vsRandom.Losses, vsRandom.Score)
	if vsRandom.Score < minRandomScore {
		t.Fatalf("latest model %s scored %.2f against random over %d games, want ≥ %.2f", last.Model, vsRandom.Score, evalGames, minRandomScore)
	}

	// Leaderboard: API and CLI agree with the loop's Elo table.
	var lb struct {
		Leaderboards []api.Leaderboard `json:"leaderboards"`
	}
	if code, _, raw := dev.call("GET", "/v1/selfplay/leaderboard?config=square8_2p&history=true", dev.admin, nil, &lb); code != 200 || len(lb.Leaderboards) != 1 {
		t.Fatalf("leaderboard: %d %s", code, raw)
	}
	board := lb.Leaderboards[0]
	var best *api.LeaderboardEntry
	for i, e := range board.Entries {
		if e.Best {
			best = &board.Entries[i]
		}
		if e.Model == "random" && (e.Elo != 1000 || !e.Anchor) {
			t.Fatalf("random baseline rated %.1f, want the 1000 anchor", e.Elo)
		}
	}
	if best == nil || best.Model != sp.State.Best || len(board.Matches) < 6 {
		t.Fatalf("leaderboard best %+v, %d matches; loop best %s", best, len(board.Matches), sp.State.Best)
	}
	t.Logf("leaderboard: best %s at Elo %.0f, velocity %.0f Elo/day (%s), %d matches", best.Model, best.Elo, board.Velocity, board.VelocityNote, len(board.Matches))
	// Minutes of ratings are not a velocity (they read 482,061.7 Elo/day).
	if board.Velocity != 0 || !strings.HasPrefix(board.VelocityNote, "too early") {
		t.Errorf("a loop minutes old has Elo velocity %.1f (%q), want too early", board.Velocity, board.VelocityNote)
	}
	if out := cli(t, dev, "selfplay", "leaderboard", "--config", "square8_2p"); !strings.Contains(out, sp.State.Best+" (best)") || !strings.Contains(out, "random (anchor)") || !strings.Contains(out, "Elo velocity too early") {
		t.Fatalf("selfplay leaderboard: %s", out)
	}
	// Following a finished loop prints each generation and returns.
	if out := cli(t, dev, "selfplay", "show", "--follow", "lab/square8_2p"); !strings.Contains(out, "gen 1 ") || !strings.Contains(out, "gen 3 ") || !strings.Contains(out, "finished") {
		t.Fatalf("selfplay show --follow: %s", out)
	}
	// Job-duration tracking: every phase of every generation measured.
	for _, phase := range []string{"generation", "selfplay", "export", "train", "gauntlet"} {
		d := sp.State.Durations[phase]
		if d == nil || d.N != 3 || d.Mean <= 0 {
			t.Fatalf("durations of %s: %+v", phase, d)
		}
		mean, p90 := d.Predict()
		t.Logf("%s: mean %v, p90 %v", phase, mean.Round(time.Millisecond), p90.Round(time.Millisecond))
	}
	if out := cli(t, dev, "selfplay", "show", id); !strings.Contains(out, "finished") || !strings.Contains(out, last.Model) || !strings.Contains(out, "generation takes") {
		t.Fatalf("selfplay show: %s", out)
	}
	if out := cli(t, dev, "selfplay", "ls", "-o", "json"); !strings.Contains(out, `"id": "lab/square8_2p"`) {
		t.Fatalf("selfplay ls: %s", out)
	}

	// A batch below the quality gate is not exported or trained on.
	body = `{"cluster":"lab","config":"square8_2p","settings":{"generations":1,"games_per_generation":24,"eval_games":2,
		"quality":{"min_games":24,"threshold":1,"min_decisive":1}}}`
	if code, _, raw := dev.call("POST", "/v1/selfplay", dev.admin, body, nil); code != http.StatusCreated {
		t.Fatalf("start loop: %d %s", code, raw)
	}
	sp = waitLoop(t, dev, id, 3*time.Minute, func(sp api.Selfplay) bool { return sp.Status != "running" })
	g := sp.State.Generations[0]
	t.Logf("strict gate: %s: %s", g.State, g.Reason)
	if sp.Status != "completed" || g.State != "rejected" || g.Quality.Passed || !strings.Contains(g.Reason, "quality score") || g.Dataset != "" || g.Model != "" || sp.State.Best != "" {
		t.Fatalf("a batch that fails the gate: status %s, generation %+v", sp.Status, g)
	}
}

// TestSelfplayKillEphemeralAgent: kill -9 of the ephemeral agent in the
// middle of a self-play batch, a quarter sync interval after one of its
// uploads, loses at most the games of one sync interval: games the killed
// agent finished (its spool) minus games in S3 is at most the largest
// upload; the retry on the other node resumes from exactly the games in
// S3 and plays none of them again.
func TestSelfplayKillEphemeralAgent(t *testing.T) {
	t.Parallel()
	dev, dir := selfplayDev(t)
	s3 := s3Client(t, dev, "")
	const interval = time.Second
	body := `{"cluster":"lab","config":"square8_2p","settings":{"generations":1,"games_per_generation":100000,"simulations":48,"bootstrap":"rollouts",
		"sync_interval":1000000000,"seed":11,"quality":{"min_games":48}}}`
	if code, _, raw := dev.call("POST", "/v1/selfplay", dev.admin, body, nil); code != http.StatusCreated {
		t.Fatalf("start loop: %d %s", code, raw)
	}
	id := "lab/square8_2p"
	sp := waitLoop(t, dev, id, 2*time.Minute, func(sp api.Selfplay) bool { return sp.State.Phase == "selfplay" && sp.LoopID != "" })
	prefix := selfplay.GamesPrefix(sp.LoopID, 1)
	inS3, victim, killed := killPlayer(t, dev, dir, s3, sp.LoopID, id, 1, 3, interval, "")
	// The retry elsewhere resumes from exactly what was synced.
	sp = waitLoop(t, dev, id, 3*time.Minute, func(sp api.Selfplay) bool {
		return len(sp.State.Generations) == 1 && len(sp.State.Generations[0].Resumed) > 0 || (sp.Live != nil && sp.Live.Resumed > 0 && sp.Live.Batches > 0)
	})
	t.Logf("retry on %s %v after the kill: %+v", sp.State.Node, time.Since(killed).Round(time.Millisecond), sp.Live)
	if sp.State.Node == victim || sp.Live == nil || sp.Live.Resumed != len(inS3) {
		t.Fatalf("retry on %s resumed from %+v, want %d games (S3 at the kill)", sp.State.Node, sp.Live, len(inS3))
	}
	retry := readBatches(t, dev, s3, prefix, 2)
	for _, b := range retry {
		for _, i := range b.indexes {
			if inS3[i] {
				t.Fatalf("the retry played game %d again", i)
			}
		}
	}
	if code, _, raw := dev.call("POST", "/v1/selfplay/"+id+"/stop?now=true", dev.admin, nil, nil); code != http.StatusAccepted {
		t.Fatalf("stop: %d %s", code, raw)
	}
	sp = waitLoop(t, dev, id, time.Minute, func(sp api.Selfplay) bool { return sp.Status != "running" })
	if sp.Status != "canceled" {
		t.Fatalf("loop after stop --now: %s", sp.Status)
	}
	recordHistory(t, dev, "selfplay/"+id, "history-kill.json")
}

// killPlayer kills -9 the agent playing generation gen's self-play (its
// first attempt) once it has made uploads of them and its spool shows a
// game finished since the latest, and counts: every game in S3 is in the
// killed agent's spool, no more than one upload's worth of the games played
// is lost, and the agent's processes whose command line holds child (your
// model's evaluator; "" for none) die with it. It returns the games in S3
// at the kill, the node and when the agent was gone.
func killPlayer(t *testing.T, dev *devProc, dir string, s3 *minio.Client, loopID, id string, gen, uploads int, interval time.Duration, child string) (map[int]bool, string, time.Time) {
	t.Helper()
	prefix := selfplay.GamesPrefix(loopID, gen)
	for deadline := time.Now().Add(2 * time.Minute); countBatches(t, dev, s3, prefix, 1) < uploads; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("generation %d's attempt 1 made fewer than %d uploads in 2 minutes", gen, uploads)
		}
	}
	victim := getLoop(t, dev, id).State.Node
	pid := agentPID(t, dev, "lab", victim)
	children := descendants(pid, child)
	if child != "" && len(children) == 0 {
		t.Fatalf("agent %d of %s runs no %s", pid, victim, child)
	}
	// Mid-interval, so the kill costs at least one game.
	waitFor(t, func() bool { played, synced := readAttemptSpool(t, dir, loopID, gen, 1); return len(played) > synced })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for !provisiontest.ProcessGone(pid) {
		time.Sleep(10 * time.Millisecond)
	}
	killed := time.Now()

	// Count: synced (S3) against played (the killed agent's spool).
	synced := readBatches(t, dev, s3, prefix, 1)
	inS3 := map[int]bool{}
	largest := 0
	for _, b := range synced {
		for _, i := range b.indexes {
			inS3[i] = true
		}
		largest = max(largest, len(b.indexes))
	}
	played, lastSynced := readAttemptSpool(t, dir, loopID, gen, 1)
	lost := 0
	for i := range played {
		if !inS3[i] {
			lost++
		}
	}
	t.Logf("killed %s (pid %d) in generation %d after %d uploads: %d games played, %d in S3, %d lost; largest upload (one %v sync interval) %d games",
		victim, pid, gen, len(synced), len(played), len(inS3), lost, interval, largest)
	if len(inS3) < lastSynced {
		t.Fatalf("the spool says %d games were synced, S3 has %d", lastSynced, len(inS3))
	}
	for i := range inS3 {
		if !played[i] {
			t.Fatalf("game %d is in S3 but not in the killed agent's spool", i)
		}
	}
	if lost > largest {
		t.Fatalf("kill -9 lost %d games, more than one sync interval's %d", lost, largest)
	}
	for _, c := range children {
		for deadline := time.Now().Add(10 * time.Second); !provisiontest.ProcessGone(c); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s (pid %d) outlived its agent by 10 s", child, c)
			}
		}
	}
	if len(children) > 0 {
		t.Logf("the agent's %d %s processes died with it", len(children), child)
	}
	return inS3, victim, killed
}

// agentPID is the pid of node's agent in cluster.
func agentPID(t *testing.T, dev *devProc, cluster, node string) int {
	t.Helper()
	var st clusterStatus
	dev.call("GET", "/v1/clusters/"+cluster, dev.admin, nil, &st)
	for _, n := range st.Nodes {
		if n.Name == node && n.AgentPID != 0 {
			return n.AgentPID
		}
	}
	t.Fatalf("no agent pid for node %s of cluster %s", node, cluster)
	return 0
}

// descendants are the processes under pid whose command line holds s.
func descendants(pid int, s string) []int {
	if s == "" {
		return nil
	}
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(b, ')'); err == nil && i > 0 {
			var state string
			var pp int
			fmt.Sscan(string(b[i+1:]), &state, &pp)
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); bytes.Contains(b, []byte(s)) {
					out = append(out, p)
				}
				break
			}
		}
	}
	return out
}

// countBatches counts an attempt's uploads (a listing only: cheap enough
// to poll).
func countBatches(t *testing.T, dev *devProc, c *minio.Client, prefix string, attempt int) int {
	t.Helper()
	n := 0
	for o := range c.ListObjects(context.Background(), dev.ep.Bucket, minio.ListObjectsOptions{Prefix: fmt.Sprintf("%sa%02d-", prefix, attempt), Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		n++
	}
	return n
}

// recordHistory saves a loop's history for workflows/selfplay's replay
// test when TRAINYARD_RECORD_HISTORY names a directory.
func recordHistory(t *testing.T, dev *devProc, workflowID, name string) {
	out := os.Getenv("TRAINYARD_RECORD_HISTORY")
	if out == "" {
		return
	}
	cmd := exec.Command("go", "run", "../tools/recordhistory", "-address", dev.ep.Temporal, "-id", workflowID)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("record history of %s: %v", workflowID, err)
	}
	if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

type batchInfo struct {
	key     string
	indexes []int
}

// readBatches lists and decodes a generation's uploads of one attempt
// with a plain S3 client.
func readBatches(t *testing.T, dev *devProc, c *minio.Client, prefix string, attempt int) []batchInfo {
	t.Helper()
	ctx := context.Background()
	var out []batchInfo
	for o := range c.ListObjects(ctx, dev.ep.Bucket, minio.ListObjectsOptions{Prefix: fmt.Sprintf("%sa%02d-", prefix, attempt), Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		obj, err := c.GetObject(ctx, dev.ep.Bucket, o.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(obj)
		if err != nil {
			t.Fatalf("%s: %v", o.Key, err)
		}
		var b selfplay.Batch
		if err := json.NewDecoder(zr).Decode(&b); err != nil {
			t.Fatalf("%s: %v", o.Key, err)
		}
		obj.Close()
		bi := batchInfo{key: o.Key}
		for _, g := range b.Games {
			bi.indexes = append(bi.indexes, g.Index)
		}
		out = append(out, bi)
	}
	return out
}

// readSpool reads attempt 1's spool in whichever agent dir holds it: the
// games it finished and the synced count of its last completed upload.
// readAttemptSpool reads one attempt's spool of generation gen in
// whichever agent dir holds it.
func readAttemptSpool(t *testing.T, dir, loopID string, gen, attempt int) (map[int]bool, int) {
	t.Helper()
	var path string
	suffix := filepath.FromSlash(fmt.Sprintf("%s/gen-%06d/a%02d.spool", strings.TrimPrefix(loopID, "selfplay/"), gen, attempt))
	_ = filepath.WalkDir(filepath.Join(dir, "agents"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, suffix) {
			path = p
		}
		return nil
	})
	if path == "" {
		t.Fatalf("no spool of attempt %d under %s/agents", attempt, dir)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	played, synced := map[int]bool{}, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l selfplay.SpoolLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // a line cut by the kill
		}
		if l.Game != nil {
			played[*l.Game] = true
		} else if l.Sync > 0 {
			synced = l.Synced
		}
	}
	return played, synced
}

// checkExport downloads an export with a plain S3 client and loads it
// with NumPy: the documented names, shapes and dtypes.
func checkExport(t *testing.T, dev *devProc, c *minio.Client, key string, positions int) {
	t.Helper()
	obj, err := c.GetObject(context.Background(), dev.ep.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(obj)
	obj.Close()
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	python := ""
	for _, p := range []string{os.Getenv("TRAINYARD_PYTHON"), "/usr/bin/python3", "python3"} {
		if p != "" && exec.Command(p, "-c", "import numpy").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		if os.Getenv("TRAINYARD_REQUIRE_NUMPY") != "" {
			t.Fatal("no python3 with numpy (make python-numpy)")
		}
		t.Logf("python3-numpy missing: %s not loaded with NumPy", key)
		return
	}
	path := filepath.Join(t.TempDir(), "export.npz")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `import sys, json, numpy as np
z = np.load(sys.argv[1], allow_pickle=False)
print(json.dumps({"arrays": {k: [z[k].dtype.str, list(z[k].shape)] for k in z.files},
                  "policy_err": float(abs(z["policy"].sum(axis=1) - 1).max()), "values": sorted(set(z["value"].tolist())),
                  "to_move": sorted(set(z["to_move"].tolist()))}))`
	raw, err := exec.Command(python, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy.load %s: %v\n%s", key, err, raw)
	}
	var got struct {
		Arrays    map[string][]any `json:"arrays"`
		PolicyErr float64          `json:"policy_err"`
		Values    []float64        `json:"values"`
		ToMove    []int            `json:"to_move"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	n := float64(positions)
	want := map[string][]any{
		"states":  {"<f4", []any{n, 3.0, 64.0}},
		"policy":  {"<f4", []any{n, 64.0}},
		"value":   {"<f4", []any{n}},
		"to_move": {"|i1", []any{n}},
	}
	if fmt.Sprint(got.Arrays) != fmt.Sprint(want) {
		t.Fatalf("numpy sees %s as %v, want %v", key, got.Arrays, want)
	}
	if got.PolicyErr > 1e-4 || fmt.Sprint(got.ToMove) != "[0 1]" {
		t.Fatalf("%s: policy rows off 1 by %g, to_move values %v", key, got.PolicyErr, got.ToMove)
	}
	for _, v := range got.Values {
		if v != -1 && v != 0 && v != 1 {
			t.Fatalf("%s: value %v outside {-1, 0, 1}", key, v)
		}
	}
}

// TestSelfplayScheduler: a cluster's scheduler gives slices of one
// generation to two configs by priority: both run once first (never-run
// boost), then the third slice goes to the one ranked highest; each
// config's loop continues its own state (best model, generations) from its
// previous slice.
func TestSelfplayScheduler(t *testing.T) {
	t.Parallel()
	dev, _ := selfplayDev(t)
	wasm := plugintest.BuildGo(t, "./plugins/kinrow/hex8_2p")
	if code, raw := upload(t, dev, dev.admin, wasm, nil); code != http.StatusCreated {
		t.Fatalf("upload hex8_2p: %d %s", code, raw)
	}
	out := cli(t, dev, "selfplay", "schedule", "start", "--cluster", "lab", "--config", "square8_2p:1", "--config", "hex8_2p:2",
		"--slice-generations", "1", "--max-slices", "3", "--games", "24", "--min-games", "24", "--simulations", "16", "--eval-games", "10", "--sync-interval", "1s")
	if !strings.Contains(out, "running") {
		t.Fatalf("schedule start: %s", out)
	}
	var sc api.SelfplaySchedule
	deadline := time.Now().Add(6 * time.Minute)
	for {
		if code, _, raw := dev.call("GET", "/v1/selfplay-schedules/lab", dev.admin, nil, &sc); code != 200 {
			t.Fatalf("get schedule: %d %s", code, raw)
		}
		if sc.Status != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("scheduler still running after 6m: %+v", sc.State)
		}
		time.Sleep(500 * time.Millisecond)
	}
	st := sc.State
	for _, h := range st.History {
		t.Logf("slice %s: priority %.2f (%s) → %s", h.Config, h.Priority, h.Why, h.Result)
	}
	if sc.Status != "completed" || st.Phase != "done" || st.Slices != 3 || len(st.History) != 3 {
		t.Fatalf("scheduler: status %s phase %s, %d slices: %s", sc.Status, st.Phase, st.Slices, sc.Error)
	}
	// hex8_2p has the larger curriculum weight: first among the never-run.
	if st.History[0].Config != "hex8_2p" || st.History[1].Config != "square8_2p" || !strings.Contains(st.History[0].Why, "never run") {
		t.Fatalf("first slices went to %s (%s) then %s", st.History[0].Config, st.History[0].Why, st.History[1].Config)
	}
	third := st.History[2]
	if third.Priority <= 0 {
		t.Fatalf("third slice had priority %v", third.Priority)
	}
	for _, c := range st.Configs {
		if c.Slices == 0 || !c.QualityKnown || c.Disabled != "" || c.ExpectedSlice <= 0 {
			t.Fatalf("config %+v", c)
		}
	}
	// The config that got two slices continued its loop: generation 2.
	if loop := st.Loops[third.Config]; loop == nil || loop.Generation != 2 || loop.Generations[0].N != 1 || loop.Generations[1].N != 2 {
		t.Fatalf("loop of %s after its second slice: %+v", third.Config, loop)
	}
	if out := cli(t, dev, "selfplay", "schedule", "show", "lab"); !strings.Contains(out, "hex8_2p") || !strings.Contains(out, "done") {
		t.Fatalf("schedule show: %s", out)
	}
	recordHistory(t, dev, "selfplay-scheduler/lab", "history-scheduler.json")
}

// TestSelfplayIdleGPU: the idle-resource daemon sees a 12 GB GPU no job
// holds, waits out its threshold and starts self-play for the biggest
// board that fits (square8_2p, not hexagonal_2p, which wants 32 GB); the
// loop takes the GPU and the daemon notes when it ends.
func TestSelfplayIdleGPU(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dev := startDev(t, dir)
	spec := `
name: lab
defaults: {provider: local, provisioner: {kind: local}}
nodes:
  - {name: gpu-box, resources: {gpus: "0:RTX 3060:12GB"}}
`
	if out := cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", spec), "--heartbeat-timeout", "5s"); !strings.Contains(out, "TOTAL (1 nodes") {
		t.Fatalf("cluster up: %s", out)
	}
	t.Cleanup(func() { killAgentsOf(dir) })
	for _, cfg := range []string{"square8_2p", "hexagonal_2p"} {
		if code, raw := upload(t, dev, dev.admin, plugintest.BuildGo(t, "./plugins/kinrow/"+cfg), nil); code != http.StatusCreated {
			t.Fatalf("upload %s: %d %s", cfg, code, raw)
		}
	}
	out := cli(t, dev, "selfplay", "idle", "start", "--cluster", "lab", "--config", "square8_2p", "--config", "hexagonal_2p",
		"--threshold", "3s", "--poll", "1s", "--generations", "1", "--games", "300", "--min-games", "300", "--simulations", "16", "--eval-games", "10")
	if !strings.Contains(out, "running") {
		t.Fatalf("idle start: %s", out)
	}
	var d api.SelfplayIdle
	sawBusy := false
	deadline := time.Now().Add(4 * time.Minute)
	for {
		if code, _, raw := dev.call("GET", "/v1/selfplay-idle/lab", dev.admin, nil, &d); code != 200 {
			t.Fatalf("get idle daemon: %d %s", code, raw)
		}
		for _, g := range d.State.GPUs {
			sawBusy = sawBusy || g.Busy
		}
		finished := false
		for _, e := range d.State.Events {
			finished = finished || strings.Contains(e.What, "loop finished")
		}
		if finished {
			break
		}
		if d.Status != "running" || time.Now().After(deadline) {
			t.Fatalf("idle daemon %s: %+v", d.Status, d.State)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, e := range d.State.Events {
		t.Logf("%s %s %s: %s", e.At.Format(time.TimeOnly), e.GPU, e.Config, e.What)
	}
	first := d.State.Events[0]
	if first.GPU != "gpu-box/0" || first.Config != "square8_2p" || !strings.Contains(first.What, "started self-play") {
		t.Fatalf("first decision: %+v", first)
	}
	for _, e := range d.State.Events {
		if e.Config == "hexagonal_2p" {
			t.Fatalf("hexagonal_2p (32 GB) started on a 12 GB GPU: %+v", e)
		}
	}
	if !sawBusy {
		t.Fatal("the GPU never showed busy while the loop it got ran")
	}
	sp := getLoop(t, dev, "lab/square8_2p")
	if sp.Status != "completed" || sp.Settings.GPUs != 1 || sp.State.Completed != 1 {
		t.Fatalf("started loop: %s, gpus %d, %d generations", sp.Status, sp.Settings.GPUs, sp.State.Completed)
	}
	if out := cli(t, dev, "selfplay", "idle", "stop", "lab"); !strings.Contains(out, "gpu-box/0") {
		t.Fatalf("idle stop: %s", out)
	}
	waitFor(t, func() bool {
		dev.call("GET", "/v1/selfplay-idle/lab", dev.admin, nil, &d)
		return d.Status == "completed" && d.State.Phase == "stopped"
	})
	recordHistory(t, dev, "selfplay-idle/lab", "history-idle.json")
}
