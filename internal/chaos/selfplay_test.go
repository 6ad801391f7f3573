package chaos

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/workflows/selfplay"
)

// selfplayGen is one self-play generation of square8_2p (500 games synced to
// S3 every second, then quality gate, export, training, gauntlet). Its
// completed units are the games in S3 (docs/selfplay.md): a game synced
// before the kill must still be there, in the same batch, afterwards.
type selfplayGen struct{ seed int }

type loopView struct {
	Status string `json:"status"`
	LoopID string `json:"loop_id"`
	Error  string `json:"error"`
	State  struct {
		Phase      string `json:"phase"`
		Reason     string `json:"reason"`
		Node       string `json:"node"`
		Completed  int    `json:"completed"`
		TotalGames int    `json:"total_games"`
		Failures   int    `json:"failures"`
	} `json:"state"`
}

const loopID = "lab/square8_2p"

func (*selfplayGen) kinds() []string { return []string{"games"} }

func (g *selfplayGen) start(t *testing.T, p *plane) string {
	g.seed++
	// MCTS with random rollouts from the start: the heuristic bootstrap
	// plays 500 games in a fraction of a second, rollouts take about 15 s
	// alone, long enough to be hit in the middle (at 50 games; docs/games.md).
	body := fmt.Sprintf(`{"cluster":"lab","config":"square8_2p","settings":{"generations":1,"games_per_generation":500,"simulations":48,
		"bootstrap":"rollouts","parallel":1,"eval_games":10,"train_epochs":2,"sync_interval":1000000000,"seed":%d,"quality":{"min_games":500}}}`, g.seed)
	p.mustJSON("POST", "/v1/selfplay", body, http.StatusCreated, nil)
	return loopID
}

func (*selfplayGen) get(p *plane, id string) (loopView, error) {
	var v loopView
	err := p.getJSON("/v1/selfplay/"+id, &v)
	return v, err
}

func (g *selfplayGen) ready(p *plane, id string) (bool, error) {
	v, err := g.get(p, id)
	if err != nil {
		return false, err
	}
	if v.Status != "running" {
		return false, fmt.Errorf("loop %s ended %s before the fault: %s", id, v.Status, v.Error)
	}
	if v.State.Phase != "selfplay" || v.LoopID == "" {
		return false, nil
	}
	u, err := g.snapshot(p, id)
	return err == nil && len(u["games"]) >= 50, nil
}

func (g *selfplayGen) node(p *plane, id string) (string, error) {
	v, err := g.get(p, id)
	return v.State.Node, err
}

func (g *selfplayGen) done(p *plane, id string) (bool, error) {
	v, err := g.get(p, id)
	if err != nil || v.Status == "running" {
		return false, nil
	}
	if v.Status != "completed" || v.State.Completed != 1 {
		return true, fmt.Errorf("loop %s: status %s phase %s, %d generations completed: %s %s", id, v.Status, v.State.Phase, v.State.Completed, v.Error, v.State.Reason)
	}
	return true, nil
}

func (g *selfplayGen) outcome(p *plane, id string) string {
	v, err := g.get(p, id)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s, %d games, %d activities redone", v.State.Phase, v.State.TotalGames, v.State.Failures)
}

// snapshot reads every batch of generation 1 in S3: game index → batch.
func (g *selfplayGen) snapshot(p *plane, id string) (units, error) {
	v, err := g.get(p, id)
	if err != nil {
		return nil, err
	}
	u := units{"games": {}}
	if v.LoopID == "" {
		return u, nil
	}
	c, err := p.s3Client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for o := range c.ListObjects(ctx, p.ep.Bucket, minio.ListObjectsOptions{Prefix: selfplay.GamesPrefix(v.LoopID, 1), Recursive: true}) {
		if o.Err != nil {
			return nil, o.Err
		}
		obj, err := c.GetObject(ctx, p.ep.Bucket, o.Key, minio.GetObjectOptions{})
		if err != nil {
			return nil, err
		}
		var b struct {
			Games []struct {
				I int `json:"i"`
			} `json:"games"`
		}
		zr, err := gzip.NewReader(obj)
		if err == nil {
			err = json.NewDecoder(zr).Decode(&b)
		}
		obj.Close()
		if err != nil {
			return nil, fmt.Errorf("batch %s: %w", o.Key, err)
		}
		for _, gm := range b.Games {
			u["games"][fmt.Sprint(gm.I)] = o.Key
		}
	}
	return u, nil
}
