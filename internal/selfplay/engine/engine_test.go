package engine

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/trainyard/trainyard/internal/selfplay"
	"github.com/trainyard/trainyard/sdk/go/games/kinrow"
)

func native(t testing.TB, name string, n int) *Native {
	t.Helper()
	cfg, err := kinrow.ParseConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	nt, err := NewNative(cfg, n)
	if err != nil {
		t.Fatal(err)
	}
	return nt
}

// checkRecord verifies a record against a replay on the native rules:
// every move legal for its player in turn, states are the mover's
// observations, policies are distributions with mass on legal moves only
// (and on the played move for one-hot players), the outcome is the
// replay's.
func checkRecord(t *testing.T, rec selfplay.Game, oneHotPolicy bool) {
	t.Helper()
	cfg, err := kinrow.ParseConfig(rec.Config)
	if err != nil {
		t.Fatal(err)
	}
	g := kinrow.MustNew(cfg)
	obs := make([]float32, kinrow.ObsDim(cfg))
	mask := make([]bool, g.Geometry().Cells())
	for i, mv := range rec.Moves {
		if mv.Player != g.ToMove() {
			t.Fatalf("move %d by player %d, player %d to move", i, mv.Player, g.ToMove())
		}
		g.Observe(mv.Player, obs)
		if !slices.Equal(obs, mv.State) {
			t.Fatalf("move %d: state is not the mover's observation", i)
		}
		g.Legal(mv.Player, mask)
		sum := float32(0)
		for a, p := range mv.Policy {
			if p < 0 || (p > 0 && !mask[a]) {
				t.Fatalf("move %d: policy %v on action %d (legal %v)", i, p, a, mask[a])
			}
			sum += p
		}
		if sum < 0.999 || sum > 1.001 {
			t.Fatalf("move %d: policy sums to %v", i, sum)
		}
		if oneHotPolicy && mv.Policy[mv.Action] != 1 {
			t.Fatalf("move %d: one-hot policy misses the played action", i)
		}
		if err := g.Apply(mv.Player, mv.Action); err != nil {
			t.Fatalf("move %d: %v", i, err)
		}
	}
	ret := make([]float32, cfg.Players)
	if term := g.Outcome(ret); term != rec.Terminal || !slices.Equal(ret, rec.Outcome) {
		t.Fatalf("record says terminal=%v %v, replay %v %v", rec.Terminal, rec.Outcome, term, ret)
	}
}

func seats(p Player, n int) []Player {
	s := make([]Player, n)
	for i := range s {
		s[i] = p
	}
	return s
}

func TestPlayGame(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		config   string
		player   Player
		oneHot   bool
		maxMoves int
	}{
		{"square8_2p", Random{}, true, 0},
		{"square8_2p", Heuristic{}, true, 0},
		{"square8_2p", &MCTS{Simulations: 16, DirichletAlpha: 0.3, TempMoves: 8}, false, 0},
		{"square8_2p", &MCTS{Simulations: 16, Native: true}, false, 0},
		{"hex8_3p", Heuristic{}, true, 0},
		{"hex8_4p", &MCTS{Simulations: 8, Native: true}, false, 0},
		{"square8_2p", &MCTS{Simulations: 16, Native: true, Gumbel: true, DirichletAlpha: 0.3}, false, 0},
		{"hex8_3p", &MCTS{Simulations: 8, Native: true, Gumbel: true, TempMoves: 2}, false, 0},
		{"square19_3p", Random{}, true, 40},
		{"hexagonal_4p", Heuristic{}, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.config+"/"+tc.player.Name(), func(t *testing.T) {
			nt := native(t, tc.config, 2)
			rec, err := PlayGame(ctx, nt, 1, 7, seats(tc.player, nt.Metadata().NumPlayers), tc.maxMoves)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Config != tc.config || rec.Engine != tc.player.Name() || rec.Illegal != 0 || rec.Seed != 7 {
				t.Fatalf("record header %+v", rec)
			}
			if tc.maxMoves > 0 && (len(rec.Moves) != tc.maxMoves || rec.Terminal) {
				t.Fatalf("capped game: %d moves, terminal %v", len(rec.Moves), rec.Terminal)
			}
			if tc.maxMoves == 0 && !rec.Terminal {
				t.Fatal("game did not end")
			}
			checkRecord(t, rec, tc.oneHot)
			again, err := PlayGame(ctx, nt, 0, 7, seats(tc.player, nt.Metadata().NumPlayers), tc.maxMoves)
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Moves) != len(rec.Moves) || !slices.EqualFunc(again.Moves, rec.Moves, func(a, b selfplay.Move) bool { return a.Action == b.Action }) {
				t.Fatal("same seed, different game")
			}
			t.Logf("%d moves, outcome %v", len(rec.Moves), rec.Outcome)
		})
	}
}

// illegal is a player that always plays cell 0.
type illegal struct{}

func (illegal) Name() string { return "illegal" }
func (illegal) Move(_ context.Context, pos Position, _ *rand.Rand, pi []float32) (int, error) {
	oneHot(pi, 0)
	return 0, nil
}

func TestIllegalCounted(t *testing.T) {
	nt := native(t, "square8_2p", 1)
	rec, err := PlayGame(context.Background(), nt, 0, 3, []Player{illegal{}, Random{}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Player 0's first move is legal; every later one is refused.
	want := (len(rec.Moves)+1)/2 - 1
	if rec.Illegal != want || rec.Engine != "illegal/random" || !rec.Terminal {
		t.Fatalf("illegal %d (want %d), engine %q, terminal %v", rec.Illegal, want, rec.Engine, rec.Terminal)
	}
}

func TestStrength(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		player  Player
		games   int
		minWins int
	}{
		{"heuristic", Heuristic{}, 20, 19},
		{"mcts-rollouts", &MCTS{Simulations: 64, Native: true}, 10, 9},
		{"gumbel-rollouts", &MCTS{Simulations: 64, Native: true, Gumbel: true}, 10, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nt := native(t, "square8_2p", 1)
			res, err := Match(ctx, nt, 0, tc.player, Random{}, tc.games, 100)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s vs random: %+v", tc.name, res)
			if res.Wins < tc.minWins {
				t.Fatalf("%d wins of %d, want at least %d", res.Wins, tc.games, tc.minWins)
			}
		})
	}
}
