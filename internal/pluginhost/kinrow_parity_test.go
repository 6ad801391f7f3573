package pluginhost_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/sdk/go/games/kinrow"
)

// TestKinrowPluginParity plays random games through the real k-in-a-row
// WASM plugin (plugins/kinrow/<config>) and the native rules in lockstep and requires the same answers to every call:
// the plugin is the rules, so engines may search on either.
func TestKinrowPluginParity(t *testing.T) {
	ctx := context.Background()
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	// One config per board family, covering 2, 3 and 4 players.
	for _, name := range []string{"square8_2p", "hex8_3p", "square19_4p", "hexagonal_2p"} {
		t.Run(name, func(t *testing.T) {
			cfg, err := kinrow.ParseConfig(name)
			if err != nil {
				t.Fatal(err)
			}
			wasm := plugintest.BuildGo(t, "./plugins/kinrow/"+name)
			meta, err := rt.Validate(ctx, wasm, pluginhost.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			geo, err := kinrow.GeometryOf(cfg.Board)
			if err != nil {
				t.Fatal(err)
			}
			if meta.Name != "kinrow-"+cfg.String() || meta.Kind != pluginhost.KindGame || meta.NumPlayers != cfg.Players ||
				meta.Action.N != geo.Cells() || meta.Observation.Dim() != kinrow.ObsDim(cfg) || meta.StateBytes != kinrow.StateBytes(cfg) {
				t.Fatalf("metadata %+v", meta)
			}
			mod, err := rt.Load(ctx, wasm, pluginhost.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(ctx)
			const n = 3
			games, err := mod.NewGames(ctx, n, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer games.Close()
			cells, np := meta.Action.N, cfg.Players
			maskW, maskN := make([]bool, cells), make([]bool, cells)
			obsW, obsN := make([]float32, meta.Observation.Dim()), make([]float32, meta.Observation.Dim())
			retW, retN := make([]float32, np), make([]float32, np)
			ends := map[string]int{}
			for round := 0; round < 4; round++ {
				for gi := 0; gi < n; gi++ {
					rng := rand.New(rand.NewPCG(uint64(round), uint64(gi)))
					native := kinrow.MustNew(cfg)
					if err := games.Reset(gi, uint64(round)); err != nil {
						t.Fatal(err)
					}
					for moves := 0; ; moves++ {
						toMove, err := games.ToMove(gi, nil)
						if err != nil {
							t.Fatal(err)
						}
						var wantMove []int
						if p := native.ToMove(); p >= 0 {
							wantMove = []int{p}
						}
						if !slices.Equal(toMove, wantMove) {
							t.Fatalf("move %d: to move %v, native %v", moves, toMove, wantMove)
						}
						over, err := games.Outcome(gi, retW)
						if err != nil {
							t.Fatal(err)
						}
						if over != native.Outcome(retN) || !slices.Equal(retW, retN) {
							t.Fatalf("move %d: outcome %v %v, native %v %v", moves, over, retW, native.Terminal(), retN)
						}
						st, err := games.Save(gi, nil)
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(st, native.Save(nil)) {
							t.Fatalf("move %d: saved states differ", moves)
						}
						for p := 0; p < np; p++ {
							if err := games.Legal(gi, p, maskW); err != nil {
								t.Fatal(err)
							}
							native.Legal(p, maskN)
							if !slices.Equal(maskW, maskN) {
								t.Fatalf("move %d: player %d legal masks differ", moves, p)
							}
							if err := games.Observe(gi, p, obsW); err != nil {
								t.Fatal(err)
							}
							native.Observe(p, obsN)
							if !slices.Equal(obsW, obsN) {
								t.Fatalf("move %d: player %d observations differ", moves, p)
							}
						}
						if over {
							switch w := native.Winner(); {
							case w >= 0:
								ends["win"]++
							default:
								ends["draw"]++
							}
							if err := games.Apply(gi, 0, 0); !errors.Is(err, pluginhost.ErrBadInput) {
								t.Fatalf("apply after the end: %v, want ErrBadInput", err)
							}
							break
						}
						p := toMove[0]
						native.Legal(p, maskN)
						// An illegal move is refused by both and changes nothing.
						if moves > 0 {
							taken := slices.Index(maskN, false)
							if err := games.Apply(gi, p, taken); !errors.Is(err, pluginhost.ErrBadInput) {
								t.Fatalf("apply on taken cell %d: %v, want ErrBadInput", taken, err)
							}
						}
						c := rng.IntN(cells)
						for !maskN[c] {
							c = (c + 1) % cells
						}
						if err := games.Apply(gi, p, c); err != nil {
							t.Fatal(err)
						}
						if err := native.Apply(p, c); err != nil {
							t.Fatal(err)
						}
						// Every few moves, round-trip through Restore.
						if moves%7 == 3 {
							if err := games.Restore(gi, native.Save(nil)); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			}
			if err := games.Restore(0, []byte{1, 2, 3}); !errors.Is(err, pluginhost.ErrBadInput) {
				t.Errorf("restore garbage: %v, want ErrBadInput", err)
			}
			t.Logf("%s: %d games through the plugin, ends %v", name, 4*n, ends)
		})
	}
}
