package quality

import (
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/selfplay"
)

// game builds a finished 2-seat game whose move sequence is actions.
func game(outcome []float32, actions ...int) selfplay.Game {
	g := selfplay.Game{Config: "square8_2p", Players: 2, Terminal: true, Outcome: outcome}
	for i, a := range actions {
		g.Moves = append(g.Moves, selfplay.Move{Player: i % 2, Action: a})
	}
	return g
}

var (
	win  = []float32{1, -1}
	draw = []float32{0, 0}
)

func TestCheck(t *testing.T) {
	illegal := game(win, 1, 2, 3)
	illegal.Illegal = 1
	unfinished := game(draw, 1, 2, 3)
	unfinished.Terminal = false
	for _, tc := range []struct {
		name   string
		games  []selfplay.Game
		cfg    Config
		want   Report
		reason string
	}{
		{
			name:  "all clean and decisive",
			games: []selfplay.Game{game(win, 1, 2, 3), game(win, 3, 2, 1), game([]float32{-1, 1}, 4, 5)},
			cfg:   Config{MinGames: 3},
			want:  Report{Games: 3, Clean: 3, Decisive: 3, Score: 1, Passed: true, Keep: []int{0, 1, 2}},
		},
		{
			name:   "too few games",
			games:  []selfplay.Game{game(win, 1, 2, 3)},
			cfg:    Config{},
			want:   Report{Games: 1, Clean: 1, Decisive: 1, Score: 1, Keep: []int{0}},
			reason: "at least 1000",
		},
		{
			name:   "each rule rejects once",
			games:  []selfplay.Game{game(win, 1, 2, 3), illegal, unfinished, game(win, 1), game(win, 1, 2, 3, 4, 5, 6), game(win, 1, 2, 3)},
			cfg:    Config{MinGames: 1, MinMoves: 2, MaxMoves: 5},
			want:   Report{Games: 6, Clean: 1, Illegal: 1, Unfinished: 1, TooShort: 1, TooLong: 1, Duplicates: 1, Decisive: 1, Score: 1.0 / 6, Keep: []int{0}},
			reason: "below 0.700",
		},
		{
			name:  "draws lower the score below the decisive target",
			games: []selfplay.Game{game(win, 1, 2), game(draw, 2, 1), game(draw, 3, 1), game(draw, 4, 1)},
			cfg:   Config{MinGames: 4, MinDecisive: 0.5, Threshold: 0.4},
			// 4 clean, 1 decisive: ratio 0.25 of 0.5 → score 0.5.
			want: Report{Games: 4, Clean: 4, Decisive: 1, Score: 0.5, Passed: true, Keep: []int{0, 1, 2, 3}},
		},
		{
			name:  "same moves in another config are no duplicate",
			games: []selfplay.Game{game(win, 1, 2), func() selfplay.Game { g := game(win, 1, 2); g.Config = "hex8_2p"; return g }()},
			cfg:   Config{MinGames: 2},
			want:  Report{Games: 2, Clean: 2, Decisive: 2, Score: 1, Passed: true, Keep: []int{0, 1}},
		},
		{
			name:   "empty batch: zero min_games means the default",
			cfg:    Config{MinGames: 0, Threshold: 0.1},
			want:   Report{},
			reason: "0 games, the gate needs at least 1000",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.games, tc.cfg)
			if !strings.Contains(got.Reason, tc.reason) || (tc.reason == "") != got.Passed {
				t.Fatalf("reason %q passed %v, want reason containing %q", got.Reason, got.Passed, tc.reason)
			}
			got.Reason = ""
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			if kept := got.Kept(tc.games); len(kept) != got.Clean {
				t.Fatalf("kept %d games, clean %d", len(kept), got.Clean)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	d := Config{}.WithDefaults()
	if d.Threshold != 0.7 || d.MinGames != 1000 {
		t.Fatalf("defaults %+v, want the seed's threshold 0.7 and 1,000 games", d)
	}
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{d, true},
		{Config{Threshold: 1.5}, false},
		{Config{MinDecisive: -0.1}, false},
		{Config{MinGames: -1}, false},
		{Config{MinMoves: 10, MaxMoves: 5}, false},
		{Config{MinMoves: 5, MaxMoves: 5}, true},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok %v", tc.cfg, err, tc.ok)
		}
	}
}
