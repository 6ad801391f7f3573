package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docBlock is a shell block of a document, with the output the document
// shows for it (a ```text block right after it), if any.
type docBlock struct {
	at      string // file:line of the opening fence
	section string // the "## " heading it is under
	host    string // the machine it runs on (`<!-- on: NAME -->` before its fence); "" for this one
	code    string
	output  string
}

// notRun marks a shell block a reader should not run as is (a production
// host, a placeholder): the line before its fence is `<!-- not run: why -->`.
const notRun = "<!-- not run"

// onHost marks a shell block that runs on another machine of a
// several-machine walk-through: `<!-- on: NAME -->`.
var onHost = regexp.MustCompile(`^<!-- on: (\S+) -->$`)

// runnableBlocks returns a document's ```sh blocks that are meant to run,
// in order.
func runnableBlocks(t *testing.T, file string) []docBlock {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out               []docBlock
		cur               *docBlock
		inFence, skipping bool
		lang, prev, sect  string
		body              strings.Builder
		afterRun          bool // only blank lines since a run block closed
	)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !inFence && strings.HasPrefix(trimmed, "```"):
			inFence, lang = true, strings.TrimPrefix(trimmed, "```")
			body.Reset()
			skipping = strings.HasPrefix(prev, notRun)
			if (lang == "sh" || lang == "bash") && !skipping {
				b := docBlock{at: fmt.Sprintf("%s:%d", filepath.Base(file), n), section: sect}
				if m := onHost.FindStringSubmatch(prev); m != nil {
					b.host = m[1]
				}
				out = append(out, b)
				cur = &out[len(out)-1]
			} else if lang != "text" || !afterRun {
				cur = nil
			}
		case inFence && trimmed == "```":
			inFence, prev = false, trimmed
			afterRun = false
			if cur != nil {
				if lang == "text" {
					cur.output = body.String()
					cur = nil
				} else {
					cur.code = body.String()
					afterRun = true
				}
			}
		case inFence:
			body.WriteString(line + "\n")
		default:
			if trimmed != "" {
				afterRun = false
				prev = trimmed
			}
			if h, ok := strings.CutPrefix(trimmed, "## "); ok {
				sect = h
			}
		}
	}
	return out
}

// mask hides what differs between runs of a command (numbers, ids, the
// progress bar, spacing), so that an output a document shows can be
// compared with a real one.
var maskers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\[[= ]*\]`), "[bar]"},
	{regexp.MustCompile(`\b(run|job|sweep|wf|loop)-[0-9A-Za-z._-]+`), "$1-ID"},
	{regexp.MustCompile(`\b[0-9a-f]{12,64}\b`), "HASH"},
	{regexp.MustCompile(`-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?`), "N"},
	{regexp.MustCompile(`\s+`), " "},
}

func mask(s string) string {
	for _, m := range maskers {
		s = m.re.ReplaceAllString(s, m.with)
	}
	return strings.TrimSpace(s)
}

// contradiction returns the first line of shown that no line of got
// matches once both are masked ("" when every line is there, in order).
func contradiction(shown, got string) string {
	var lines []string
	for _, l := range strings.Split(got, "\n") {
		lines = append(lines, mask(l))
	}
	i := 0
	for _, want := range strings.Split(shown, "\n") {
		w := mask(want)
		if w == "" {
			continue
		}
		for i < len(lines) && !strings.Contains(lines[i], w) {
			i++
		}
		if i == len(lines) {
			return want
		}
		i++
	}
	return ""
}

// runDocs runs the blocks in one shell, in order, from dir: variables
// carry from block to block, and the first command that fails stops it.
// Each block's output is checked against the output the document shows.
func runDocs(t *testing.T, ctx context.Context, dir string, env []string, blocks []docBlock) {
	t.Helper()
	const mark = "@@trainyard-doc-block "
	var script strings.Builder
	script.WriteString("set -eEo pipefail\ntrap 'echo \"FAILED at $__at: $BASH_COMMAND (exit $?)\" >&2' ERR\n")
	for i, b := range blocks {
		fmt.Fprintf(&script, "__at=%q\necho %q \"$EPOCHREALTIME\"\n%s\n", b.at, mark+fmt.Sprint(i), b.code)
	}
	script.WriteString("echo " + mark + "-1 \"$EPOCHREALTIME\"\n")
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	parts := strings.Split(out.String(), mark)
	// Each mark carries the shell's clock: a block's time is the next one's
	// start less its own (the time table's slowest tests point here).
	at := make([]float64, len(parts))
	for k, p := range parts[1:] {
		fmt.Sscanf(p, "%d %f", new(int), &at[k+1])
	}
	for k, p := range parts[1:] {
		var i int
		fmt.Sscanf(p, "%d", &i)
		if i < 0 {
			break
		}
		_, body, _ := strings.Cut(p, "\n")
		took := ""
		if k+2 < len(parts) && at[k+2] > 0 {
			took = fmt.Sprintf(" (%.0f s)", at[k+2]-at[k+1])
		}
		t.Logf("%s%s:\n%s%s", blocks[i].at, took, indent(blocks[i].code, "  $ "), indent(body, "  "))
		if finished := k < len(parts)-2 || err == nil; finished && blocks[i].output != "" {
			if line := contradiction(blocks[i].output, body); line != "" {
				t.Errorf("%s: the output shown has %q; the real one has no such line:\n%s", blocks[i].at, line, body)
			}
		}
	}
	if err != nil {
		t.Fatalf("the documents' commands failed after %s: %v (%s)", time.Since(start).Round(time.Second), err, lastLine(out.String()))
	}
	t.Logf("%d blocks ran in %s", len(blocks), time.Since(start).Round(time.Second))
}

func indent(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// checkout is a working directory that reads as a fresh checkout: the
// repository's files, without bin/ (the commands find the binary under
// test on PATH) and .trainyard (a fresh dev's).
func checkout(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The documents use the built-in plugins, which the binary under test
	// carries only when make packed them before it was built.
	if _, err := os.Stat(filepath.Join(root, "plugins", "builtin", "wasm", "index.json")); err != nil {
		t.Fatalf("no built-in plugins to embed (%v): run `make builtin-plugins` (make test does)", err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case "bin", ".trainyard", ".git", ".cache":
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// docEnv is the environment the documents' commands run in: the binary
// under test first on PATH, and none of the caller's TRAINYARD_* settings.
func docEnv(t *testing.T) []string {
	t.Helper()
	bin := t.TempDir()
	if err := os.Symlink(binary, filepath.Join(bin, "trainyard")); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "TRAINYARD_") {
			env = append(env, kv)
		}
	}
	return env
}

// TestReadme runs every README shell block meant to be run, in order, as a
// new user would after `make run`: a fresh `trainyard dev` on the default
// ports, from a checkout. Any failing command, or an output that
// contradicts the one the README shows, fails it. It is the only test on
// the ports `make run` uses (the README's curl lines name them).
func TestReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a CartPole run to 475 and a self-play loop")
	}
	t.Parallel()
	blocks := runnableBlocks(t, "../../README.md")
	if len(blocks) < 5 {
		t.Fatalf("only %d runnable blocks in README.md", len(blocks))
	}
	dir := checkout(t)
	startDev(t, filepath.Join(dir, ".trainyard"), "--api-port", "8080", "--temporal-port", "7233", "--ui-port", "8233", "--s3-port", "9000")
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	runDocs(t, ctx, dir, docEnv(t), blocks)
}

// TestDocsQuickStarts runs the docs' shell blocks meant to be run the same
// way, on a local cluster named lab (what the docs call it). Its dev has
// ports of its own, so it runs beside TestReadme: the docs' curl lines
// name localhost:8080, and a curlrc (CURL_HOME) sends them to its API.
func TestDocsQuickStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a CartPole run to 475, a sweep and a self-play loop")
	}
	t.Parallel()
	var blocks []docBlock
	for _, f := range []string{"training.md", "selfplay.md", "scheduling.md", "observability.md", "llm.md"} {
		blocks = append(blocks, runnableBlocks(t, filepath.Join("../../docs", f))...)
	}
	dir := checkout(t)
	dev := startDev(t, filepath.Join(dir, ".trainyard"))
	local, err := os.ReadFile("../../deploy/examples/local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", strings.Replace(string(local), "name: dev", "name: lab", 1)))
	u, err := url.Parse(dev.ep.API)
	if err != nil {
		t.Fatal(err)
	}
	curlHome := t.TempDir()
	if err := os.WriteFile(filepath.Join(curlHome, ".curlrc"), fmt.Appendf(nil, "connect-to = \"localhost:8080:%s\"\n", u.Host), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	runDocs(t, ctx, dir, append(docEnv(t), "CURL_HOME="+curlHome), blocks)
}

// TestDocBlocks: which blocks run, which output goes with which block, and
// that a contradicting output is caught.
func TestDocBlocks(t *testing.T) {
	t.Parallel()
	doc := filepath.Join(t.TempDir(), "doc.md")
	os.WriteFile(doc, []byte("# t\n\n```sh\necho a\n```\n\n```text\nrun run-12ab done: 3 steps\n```\n\n<!-- not run: placeholder -->\n```sh\nfalse\n```\n```yaml\nk: v\n```\n```bash\necho b\n```\ntext\n```text\nnot an output\n```\n## Two machines\n\n<!-- on: box-1 -->\n```sh\necho c\n```\n"), 0o644)
	bs := runnableBlocks(t, doc)
	if len(bs) != 3 || bs[0].code != "echo a\n" || bs[0].output != "run run-12ab done: 3 steps\n" || bs[1].code != "echo b\n" || bs[1].output != "" ||
		bs[0].host != "" || bs[0].section != "" || bs[2].host != "box-1" || bs[2].section != "Two machines" {
		t.Fatalf("blocks: %+v", bs)
	}
	for _, tc := range []struct {
		shown, got string
		ok         bool
	}{
		{"run run-12ab done: 3 steps", "x\nrun run-9f3c-t01 done:  41 steps\n", true},
		{"[===   ] succeeded iter 7/50", "[==========] succeeded iter 50/50", true},
		{"a\nb", "b\na", false},
		{"succeeded", "completed: target not reached", false},
	} {
		if got := contradiction(tc.shown, tc.got) == ""; got != tc.ok {
			t.Errorf("contradiction(%q, %q) ok=%v, want %v", tc.shown, tc.got, got, tc.ok)
		}
	}
}
