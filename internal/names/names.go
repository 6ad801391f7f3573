// Package names holds the one check of each kind of name a request or a
// plugin carries: where it may end up (a path in S3 or on a node, a
// workflow id, an environment, a log line) decides what it may contain, and
// every door (the API, plugin metadata, the cluster spec, the agent) asks
// the same Kind, so nothing malformed gets as far as a node.
package names

import (
	"fmt"
	"regexp"
	"unicode"
	"unicode/utf8"
)

// Kind is one kind of name.
type Kind struct {
	what string
	re   *regexp.Regexp // nil: a label (any printable text)
	max  int            // labels: most runes
	rule string         // what the error tells a person
}

var (
	// Cluster names task queues and workflow ids: a DNS label.
	Cluster = Kind{what: "cluster name", re: regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`),
		rule: "1-63 lower-case letters, digits and '-', not at either end"}
	// Node names agents' directories and hosts.
	Node = Kind{what: "node name", re: regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`),
		rule: "1-63 letters, digits, '.', '_' and '-', starting with a letter or digit"}
	// Plugin is a plugin's name (its metadata): part of S3 keys and file names.
	Plugin = Kind{what: "plugin name", re: regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`),
		rule: "1-64 letters, digits, '.', '_' and '-', starting with a letter or digit"}
	// Version is a plugin's version (semver and its friends); like a name,
	// it becomes part of keys and file names, so no '/', no "..".
	Version = Kind{what: "version", re: regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9+_-]|\.[A-Za-z0-9+_-]){0,63}$`),
		rule: "1-64 letters, digits, '+', '_', '-' and single '.' between them (e.g. 1.2.0-rc.1+build.5)"}
	// EnvKey is an environment variable a job or run sets on a node.
	EnvKey = Kind{what: "environment variable name", re: regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`),
		rule: "1-128 letters, digits and '_', not starting with a digit"}
	// Endpoint is an inference or trainer endpoint a cluster declares and
	// a run grants or names.
	Endpoint = Kind{what: "endpoint name", re: regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`),
		rule: "1-63 lower-case letters, digits, '_' and '-'"}
	// Config is a self-play config or a game's board (hex8_2p).
	Config = Kind{what: "config name", re: regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`),
		rule: "1-63 lower-case letters, digits, '_' and '-'"}
	// User is a login account on a node (a node's job_user): POSIX-portable
	// user names, or a numeric uid.
	User = Kind{what: "user name", re: regexp.MustCompile(`^([a-z_][a-z0-9_-]{0,31}|[0-9]{1,10})$`),
		rule: "a user name (1-32 lower-case letters, digits, '_' and '-', not starting with '-' or a digit) or a numeric uid"}
	// Agent is a multi-agent env's agent (its metadata) and Policy a run's
	// policy: both become metric tags (policy/<name>/...), so no '/', and
	// no '*' or '?', which policy_mapping patterns use.
	Agent = Kind{what: "agent name", re: regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`),
		rule: "1-63 letters, digits, '.', '_' and '-', starting with a letter or digit"}
	Policy = Kind{what: "policy name", re: regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`),
		rule: "1-63 letters, digits, '.', '_' and '-', starting with a letter or digit"}
	// Label is a name for people (a run's or a sweep's): any printable
	// text up to 128 characters, no control characters (NUL, newlines,
	// escapes) that would forge log lines or terminal output.
	Label = Kind{what: "label", max: 128, rule: "at most 128 printable characters (no control characters)"}
)

// Check is nil when s is a valid name of this kind; its error says what
// the rule is.
func (k Kind) Check(s string) error {
	if k.re != nil {
		if !k.re.MatchString(s) {
			return fmt.Errorf("%s %q: want %s", k.what, clip(s), k.rule)
		}
		return nil
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q: not UTF-8", k.what, clip(s))
	}
	if n := utf8.RuneCountInString(s); n > k.max {
		return fmt.Errorf("%s of %d characters: want %s", k.what, n, k.rule)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%s %q: character %U: want %s", k.what, clip(s), r, k.rule)
		}
	}
	return nil
}

// Rule says what a valid name of this kind is (for API docs and errors).
func (k Kind) Rule() string { return k.rule }

// clip keeps an error about a huge name short.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
