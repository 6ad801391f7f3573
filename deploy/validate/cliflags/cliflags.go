// Package cliflags reads, from the Go source of cmd/trainyard, which flags
// and which TRAINYARD_* environment variables each `trainyard` command
// accepts, so deployment files can be checked against the real binary's
// interface without building it (the build embeds a Temporal server and
// takes minutes).
//
// It is a syntactic reading, written for how cmd/trainyard is organised:
// flags are defined by pflag methods on a *pflag.FlagSet parameter, on a
// variable assigned from X.Flags() or X.PersistentFlags(), or on such a
// call directly; a command is a function holding one cobra.Command literal;
// what a command accepts is what its function and every package function it
// calls (transitively) define, plus the root command's own flags.
package cliflags

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// EnvPrefix and EnvName mirror internal/config: --temporal-address is
// TRAINYARD_TEMPORAL_ADDRESS.
const EnvPrefix = "TRAINYARD_"

// EnvName is the environment variable that sets flag.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Command is what one command accepts.
type Command struct {
	Name  string
	Flags map[string]bool // flag names, without "--"
	// Env holds the TRAINYARD_* variables the command reads: one per flag,
	// and those read directly with os.Getenv/os.LookupEnv (a join secret).
	Env map[string]bool
}

// Accepts reports whether name is a flag of c.
func (c Command) Accepts(flag string) bool { return c.Flags[flag] }

// ReadsEnv reports whether c reads the environment variable name.
func (c Command) ReadsEnv(name string) bool { return c.Env[name] }

type funcInfo struct {
	flags, env map[string]bool
	calls      map[string]bool // names mentioned: callees and function values
	uses       []string        // Use: of cobra.Command literals
}

// flagMethod matches pflag's flag-defining methods; Var forms take the
// name second, the others first.
var flagMethod = regexp.MustCompile(`^(Bool|Int|Int8|Int16|Int32|Int64|Uint|Uint8|Uint16|Uint32|Uint64|Float32|Float64|String|Duration|StringSlice|StringArray|StringToString|IntSlice|BoolSlice|DurationSlice|Count|IP|IPNet|IPSlice|BytesHex|BytesBase64)(Var)?(P)?$|^Var(P)?$`)

// Read parses the package in dir (cmd/trainyard) and returns its commands
// by name ("trainyard" is the root).
func Read(dir string) (map[string]Command, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	funcs := map[string]*funcInfo{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("cliflags: %w", err)
		}
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || fd.Recv != nil {
				continue
			}
			funcs[fd.Name.Name] = inspect(fd)
		}
	}
	root := ""
	cmds := map[string]string{} // command name -> function
	for name, fi := range funcs {
		if len(fi.uses) != 1 {
			continue // no command, or several: not attributable
		}
		use := strings.Fields(fi.uses[0])
		if len(use) == 0 {
			continue
		}
		cmds[use[0]] = name
		if use[0] == "trainyard" {
			root = name
		}
	}
	if root == "" {
		return nil, fmt.Errorf("cliflags: no root command (Use: \"trainyard\") in %s", dir)
	}
	out := map[string]Command{}
	for cmd, fn := range cmds {
		c := Command{Name: cmd, Flags: map[string]bool{}, Env: map[string]bool{}}
		add := func(fi *funcInfo) {
			for f := range fi.flags {
				c.Flags[f] = true
				c.Env[EnvName(f)] = true
			}
			for e := range fi.env {
				c.Env[e] = true
			}
		}
		add(funcs[root]) // persistent flags and TRAINYARD_CONFIG
		if fn != root {
			seen := map[string]bool{}
			var walk func(string)
			walk = func(name string) {
				fi, ok := funcs[name]
				if !ok || seen[name] {
					return
				}
				seen[name] = true
				add(fi)
				for callee := range fi.calls {
					walk(callee)
				}
			}
			walk(fn)
		}
		out[cmd] = c
	}
	return out, nil
}

func inspect(fd *ast.FuncDecl) *funcInfo {
	fi := &funcInfo{flags: map[string]bool{}, env: map[string]bool{}, calls: map[string]bool{}}
	flagSets := map[string]bool{}
	for _, p := range fd.Type.Params.List {
		if isFlagSetType(p.Type) {
			for _, n := range p.Names {
				flagSets[n.Name] = true
			}
		}
	}
	// Variables assigned from X.Flags() / X.PersistentFlags().
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, rhs := range as.Rhs {
				if id, ok := as.Lhs[i].(*ast.Ident); ok && isFlagsCall(rhs) {
					flagSets[id.Name] = true
				}
			}
		}
		return true
	})
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CompositeLit:
			if sel, ok := x.Type.(*ast.SelectorExpr); ok && isIdent(sel.X, "cobra") && sel.Sel.Name == "Command" {
				for _, el := range x.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Use") {
						if s, ok := stringLit(kv.Value); ok {
							fi.uses = append(fi.uses, s)
						}
					}
				}
			}
		case *ast.Ident:
			// Every name the body mentions: calls, and functions passed
			// as values (RunE: runAgent). Names of no package function
			// are dropped when the graph is walked.
			fi.calls[x.Name] = true
		case *ast.CallExpr:
			switch fun := x.Fun.(type) {
			case *ast.SelectorExpr:
				if isIdent(fun.X, "os") && (fun.Sel.Name == "Getenv" || fun.Sel.Name == "LookupEnv") && len(x.Args) == 1 {
					if s, ok := stringLit(x.Args[0]); ok && strings.HasPrefix(s, EnvPrefix) {
						fi.env[s] = true
					}
				}
				m := flagMethod.FindStringSubmatch(fun.Sel.Name)
				if m == nil || !(isFlagsCall(fun.X) || isFlagSetVar(fun.X, flagSets)) {
					break
				}
				idx := 0
				if m[2] != "" || strings.HasPrefix(fun.Sel.Name, "Var") {
					idx = 1
				}
				if idx < len(x.Args) {
					if s, ok := stringLit(x.Args[idx]); ok {
						fi.flags[s] = true
					}
				}
			}
		}
		return true
	})
	return fi
}

func isFlagSetType(e ast.Expr) bool {
	st, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := st.X.(*ast.SelectorExpr)
	return ok && isIdent(sel.X, "pflag") && sel.Sel.Name == "FlagSet"
}

func isFlagsCall(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && (sel.Sel.Name == "Flags" || sel.Sel.Name == "PersistentFlags" || sel.Sel.Name == "LocalFlags")
}

func isFlagSetVar(e ast.Expr, sets map[string]bool) bool {
	id, ok := e.(*ast.Ident)
	return ok && sets[id.Name]
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func stringLit(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

// Sorted returns the keys of a set in order, for messages.
func Sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
