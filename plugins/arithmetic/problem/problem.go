// Package problem generates and checks the arithmetic env's problems; it is
// shared by the plugin and by tests and servers that play the model.
package problem

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MaxOperand bounds operands.
const MaxOperand = 99

// Problem is a op b.
type Problem struct {
	A, B int
	Op   int // 0 +, 1 -, 2 *
}

var ops = []string{"+", "-", "*"}

// Draw draws a problem from a splitmix64 state.
func Draw(state *uint64) Problem {
	next := func() uint64 {
		*state += 0x9e3779b97f4a7c15
		z := *state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	return Problem{A: int(next() % (MaxOperand + 1)), B: int(next() % (MaxOperand + 1)), Op: int(next() % 3)}
}

// Answer is the correct result.
func (p Problem) Answer() int {
	switch p.Op {
	case 0:
		return p.A + p.B
	case 1:
		return p.A - p.B
	}
	return p.A * p.B
}

// Observe writes the observation [a, b, op].
func (p Problem) Observe(obs []float32) {
	obs[0], obs[1], obs[2] = float32(p.A), float32(p.B), float32(p.Op)
}

// Question is "What is a op b?".
func (p Problem) Question() string { return fmt.Sprintf("What is %d %s %d?", p.A, ops[p.Op], p.B) }

// Prompt is the question in prompt style 0 (answer only) or 1 (work it out).
func (p Problem) Prompt(style int) string {
	if style == 1 {
		return p.Question() + " Work it out step by step, then give the number alone on the last line."
	}
	return p.Question() + " Answer with the number only."
}

var questionRE = regexp.MustCompile(`What is (\d+) ([-+*]) (\d+)\?`)

// Parse finds the problem in a prompt (for servers that play the model).
func Parse(prompt string) (Problem, bool) {
	m := questionRE.FindStringSubmatch(prompt)
	if m == nil {
		return Problem{}, false
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[3])
	return Problem{A: a, B: b, Op: strings.Index("+-*", m[2])}, true
}

var intRE = regexp.MustCompile(`-?\d+`)

// Reward is 1 when the last integer in the model's answer is correct.
func (p Problem) Reward(answer string) float32 {
	all := intRE.FindAllString(answer, -1)
	if len(all) == 0 {
		return 0
	}
	v, err := strconv.Atoi(all[len(all)-1])
	if err != nil || v != p.Answer() {
		return 0
	}
	return 1
}
