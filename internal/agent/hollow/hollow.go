// Package hollow runs a simulated node's jobs (as kubemark's hollow nodes
// and KWOK do): no process is forked; a job's command is read as a plan (how
// long it sleeps, what it prints, how it exits) that the agent then plays
// out through the same activity and reporting path a real job takes.
package hollow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MaxDuration caps a plan's sleep, so a typo cannot hold a node for ever
// (the errors say "24h").
const MaxDuration = 24 * time.Hour

// Plan is what a job's command would do.
type Plan struct {
	Duration time.Duration // total sleep
	ExitCode int           // 0..255
	Output   string        // what its echo steps print
}

// supported ends every error about a command a hollow node cannot honour.
const supported = "a hollow node runs only sleep, true, false and echo, or a sh/bash -c script of those and exit joined by ;, && or newlines"

var errUnsupported = errors.New(supported)

// Parse reads command as a Plan: ["sleep","2.5"], ["true"], ["false"],
// ["echo",...] or ["sh","-c",script] whose script is those steps and
// `exit C`. The error names the command.
func Parse(command []string) (Plan, error) {
	p, err := parse(command)
	if err != nil {
		return Plan{}, fmt.Errorf("hollow node cannot run %q: %w", strings.Join(command, " "), err)
	}
	return p, nil
}

func parse(command []string) (Plan, error) {
	if len(command) == 0 {
		return Plan{}, fmt.Errorf("empty command; %w", errUnsupported)
	}
	if name := filepath.Base(command[0]); (name == "sh" || name == "bash") && len(command) >= 3 && command[1] == "-c" {
		// Words after the script are $0, $1...: unused, as the script
		// cannot expand them.
		return script(command[2])
	}
	var pl play
	code, _, err := pl.step(command, false, 0)
	return pl.plan(code), err
}

// script plays a shell script out: lists split by ; or newlines, each a
// chain of steps joined by && that stops at the first failing one. Its
// status is the last list's, unless a step exits first.
func script(s string) (Plan, error) {
	lists, err := split(s)
	if err != nil {
		return Plan{}, err
	}
	var pl play
	status := 0
	for _, chain := range lists {
		for _, args := range chain {
			code, exit, err := pl.step(args, true, status)
			if err != nil {
				return Plan{}, err
			}
			if status = code; exit {
				return pl.plan(status), nil
			}
			if status != 0 {
				break
			}
		}
	}
	return pl.plan(status), nil
}

// play is a Plan being read (output in a Builder: concatenation is
// quadratic in a long script).
type play struct {
	sleep time.Duration
	out   strings.Builder
}

func (p *play) plan(code int) Plan {
	return Plan{Duration: p.sleep, ExitCode: code, Output: p.out.String()}
}

// step adds one simple command to p: its status, and whether it ends the
// script (exit, shell only; last is the status a bare exit returns).
func (p *play) step(args []string, shell bool, last int) (code int, exit bool, err error) {
	switch filepath.Base(args[0]) {
	case "true":
		return 0, false, nil
	case "false":
		return 1, false, nil
	case "echo":
		p.out.WriteString(strings.Join(args[1:], " "))
		p.out.WriteByte('\n')
		return 0, false, nil
	case "sleep":
		if len(args) == 1 {
			return 0, false, errors.New("sleep: missing duration")
		}
		for _, a := range args[1:] { // GNU sleep sums its arguments
			d, err := duration(a)
			if err != nil {
				return 0, false, err
			}
			if p.sleep += d; p.sleep > MaxDuration {
				return 0, false, errors.New("sleep: more than 24h in all")
			}
		}
		return 0, false, nil
	case "exit":
		if !shell { // a shell builtin, not a binary a job could exec
			break
		}
		switch len(args) {
		case 1:
			return last, true, nil
		case 2:
			c, err := strconv.Atoi(args[1])
			if err != nil || c < 0 || c > 255 || args[1][0] == '+' {
				return 0, false, fmt.Errorf("exit: code %q is not 0..255", args[1])
			}
			return c, true, nil
		default:
			return 0, false, errors.New("exit: too many arguments")
		}
	}
	return 0, false, fmt.Errorf("%s: %w", args[0], errUnsupported)
}

var suffixes = map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}

// duration is a sleep argument: non-negative decimal seconds, or with
// GNU sleep's suffix s, m, h or d.
func duration(s string) (time.Duration, error) {
	unit, num := time.Second, s
	if n := len(s); n > 0 {
		if u, ok := suffixes[s[n-1]]; ok {
			unit, num = u, s[:n-1]
		}
	}
	// ParseFloat alone would take "inf", "1e3", "-1" and hex.
	if strings.Trim(num, "0123456789.") != "" || strings.Count(num, ".") > 1 || strings.Trim(num, ".") == "" {
		return 0, fmt.Errorf("sleep: invalid duration %q (non-negative seconds, or with suffix s, m, h or d)", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if ns := f * float64(unit); err != nil || ns > float64(MaxDuration) {
		return 0, fmt.Errorf("sleep: %q is more than 24h", s)
	}
	return time.Duration(math.Round(f * float64(unit))), nil
}

// special are the shell characters a plan cannot honour (pipes,
// redirections, subshells, expansions, globs, comments), outside quotes.
const special = "|&<>()$`\\#*?[]{}~"

// split reads a script into lists (split by ; or newlines) of chains
// (steps joined by &&) of words. Quotes group words; nothing expands.
func split(s string) ([][][]string, error) {
	var (
		lists  [][][]string
		chain  [][]string
		words  []string
		word   strings.Builder
		inWord bool
	)
	endWord := func() {
		if inWord {
			words, inWord = append(words, word.String()), false
			word.Reset()
		}
	}
	endStep := func() error {
		endWord()
		if len(words) == 0 {
			return errors.New("&& without a command on each side")
		}
		chain, words = append(chain, words), nil
		return nil
	}
	endList := func() error {
		endWord()
		if len(words) == 0 && len(chain) == 0 {
			return nil // blank line, trailing ;
		}
		if err := endStep(); err != nil {
			return err
		}
		lists, chain = append(lists, chain), nil
		return nil
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ' || c == '\t':
			endWord()
		case c == ';' || c == '\n':
			if err := endList(); err != nil {
				return nil, err
			}
		case c == '&' && strings.HasPrefix(s[i:], "&&"):
			if err := endStep(); err != nil {
				return nil, err
			}
			i++
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			quoted := s[i+1 : i+1+j]
			if c == '"' && strings.ContainsAny(quoted, "$`\\") {
				return nil, fmt.Errorf("expansion in %q: %w", quoted, errUnsupported)
			}
			word.WriteString(quoted)
			inWord, i = true, i+1+j
		case strings.IndexByte(special, c) >= 0:
			return nil, fmt.Errorf("shell syntax %q: %w", c, errUnsupported)
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if err := endList(); err != nil {
		return nil, err
	}
	return lists, nil
}

// Run plays p out: it sleeps p.Duration, calling beat every `every` (where
// the caller heartbeats), and returns ctx.Err() as soon as ctx is done.
// The exit code and output are the caller's to report.
func Run(ctx context.Context, p Plan, every time.Duration, beat func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := time.NewTimer(p.Duration)
	defer done.Stop()
	var tick <-chan time.Time
	if every > 0 && beat != nil {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-done.C:
			return nil
		case <-tick:
			beat()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
