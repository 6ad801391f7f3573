package problem

import "testing"

func TestRewardAndParse(t *testing.T) {
	p := Problem{A: 12, B: 7, Op: 1}
	for _, tc := range []struct {
		answer string
		want   float32
	}{
		{"5", 1},
		{"12 - 7 = 5\n5", 1},
		{"The answer is 5.", 1},
		{"19", 0},
		{"", 0},
		{"-5", 0},
	} {
		if got := p.Reward(tc.answer); got != tc.want {
			t.Errorf("Reward(%q) = %v, want %v", tc.answer, got, tc.want)
		}
	}
	for style := range 2 {
		q, ok := Parse(p.Prompt(style))
		if !ok || q != p {
			t.Errorf("Parse(Prompt(%d)) = %+v, %v; want %+v", style, q, ok, p)
		}
	}
	var s uint64 = 42
	for range 1000 {
		q := Draw(&s)
		if q.A < 0 || q.A > MaxOperand || q.B < 0 || q.B > MaxOperand || q.Op < 0 || q.Op > 2 {
			t.Fatalf("Draw gave %+v", q)
		}
	}
}
