package engine

import (
	"context"
	"math/rand/v2"
	"testing"
)

// misled is an evaluator that puts half its prior on one decoy move, a
// tenth on another, almost nothing on the rest, and values every position
// even.
type misled struct{ decoy, other int }

func (m misled) Evaluate(_ []float32, legal []bool, priors, values []float32) error {
	for a, ok := range legal {
		priors[a] = 0
		if ok {
			priors[a] = 1e-4
		}
	}
	priors[m.decoy], priors[m.other] = 0.5, 0.1
	clear(values)
	return nil
}

// winInOne plays random moves on square8_2p until the player to move has
// exactly one winning move, and returns that position with the move.
func winInOne(t *testing.T) (*Native, int, int, []bool) {
	t.Helper()
	nt := native(t, "square8_2p", 1)
	rng := rand.New(rand.NewPCG(5, 9))
	na := nt.Metadata().Action.N
	legal, ret := make([]bool, na), make([]float32, 2)
	for ply := 0; ; ply++ {
		toMove, err := nt.ToMove(0, nil)
		if err != nil || len(toMove) == 0 {
			t.Fatalf("no position with a single winning move (ply %d, %v)", ply, err)
		}
		p := toMove[0]
		if err := nt.Legal(0, p, legal); err != nil {
			t.Fatal(err)
		}
		state, _ := nt.Save(0, nil)
		var wins []int
		for a, ok := range legal {
			if !ok {
				continue
			}
			if err := nt.Apply(0, p, a); err != nil {
				t.Fatal(err)
			}
			if over, _ := nt.Outcome(0, ret); over && ret[p] > 0 {
				wins = append(wins, a)
			}
			if err := nt.Restore(0, state); err != nil {
				t.Fatal(err)
			}
		}
		if len(wins) == 1 {
			return nt, p, wins[0], legal
		}
		if err := nt.Apply(0, p, randomLegal(legal, rng)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGumbelValuesOverrulePriors: the model puts 5× the prior on a decoy
// as on the one winning move; the values the search finds must overrule
// it. With 32 simulations the root search plays the win in nearly every
// seed (Gumbel noise may leave it out of the 16 considered moves, rarely:
// its prior is the second), and the improved policy it records for
// training gives the win more than the model's prior did. A search that
// ignored its values, or had their sign wrong, plays the decoy.
func TestGumbelValuesOverrulePriors(t *testing.T) {
	nt, p, win, legal := winInOne(t)
	decoy := -1
	for a, ok := range legal {
		if ok && a != win {
			decoy = a
			break
		}
	}
	m := &MCTS{Simulations: 32, Gumbel: true, Eval: misled{decoy: decoy, other: win}}
	pi := make([]float32, len(legal))
	const seeds = 20
	played := 0
	for seed := range uint64(seeds) {
		a, err := m.Move(context.Background(), Position{Games: nt, Game: 0, Player: p, Legal: legal, Ply: 30}, rand.New(rand.NewPCG(seed, 1)), pi)
		if err != nil {
			t.Fatal(err)
		}
		if a == win {
			played++
		}
		if pi[win] <= 0.1 && a == win {
			t.Errorf("seed %d: improved policy gives the win %.3f, the model's prior 0.1", seed, pi[win])
		}
	}
	if played < seeds-2 {
		t.Fatalf("played the winning move in %d of %d searches; want at least %d", played, seeds, seeds-2)
	}
	puct := &MCTS{Simulations: 32, Eval: misled{decoy: decoy, other: win}}
	a, err := puct.Move(context.Background(), Position{Games: nt, Game: 0, Player: p, Legal: legal, Ply: 30}, rand.New(rand.NewPCG(1, 1)), pi)
	t.Logf("Gumbel played the win in %d of %d searches; PUCT with as many simulations played %d (the win is %d, the decoy %d, err %v)", played, seeds, a, win, decoy, err)
}
