package policy

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestResult is one Rego test's outcome.
type TestResult struct {
	Package  string        `json:"package"`
	Name     string        `json:"name"`
	Location string        `json:"location"`
	Pass     bool          `json:"pass"`
	Skip     bool          `json:"skip,omitempty"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// RunTests runs the bundle's Rego unit tests (test_* rules) with OPA's
// tester package, like `opa test`. The error is for a bundle that does not
// parse or compile; failing tests are results with Pass false.
func RunTests(ctx context.Context, b Bundle) ([]TestResult, error) {
	modules := map[string]*ast.Module{}
	for path, src := range b.Modules {
		m, err := ast.ParseModuleWithOpts(path, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("rego tests: %w", err)
		}
		modules[path] = m
	}
	data, err := roundTrip(b.Data)
	if err != nil {
		return nil, fmt.Errorf("rego tests: data: %w", err)
	}
	ch, err := tester.NewRunner().
		SetStore(inmem.NewFromObject(data)).
		SetModules(modules).
		SetDefaultRegoVersion(ast.RegoV1).
		RunTests(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("rego tests: %w", err)
	}
	var out []TestResult
	for r := range ch {
		tr := TestResult{Package: r.Package, Name: r.Name, Pass: r.Pass(), Skip: r.Skip, Duration: r.Duration}
		if r.Location != nil {
			tr.Location = fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
		}
		if r.Error != nil {
			tr.Error = r.Error.Error()
			// A compile error arrives as one result without a test name.
			if r.Name == "" {
				return nil, fmt.Errorf("rego tests: %w", r.Error)
			}
		}
		out = append(out, tr)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Package != out[j].Package {
			return out[i].Package < out[j].Package
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}
