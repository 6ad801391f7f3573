package main

import (
	"slices"
	"testing"
)

func TestViolations(t *testing.T) {
	const m = Module + "/"
	for _, tc := range []struct {
		p    Package
		want []string
	}{
		{Package{Path: m + "sdk/go/plugin", Imports: []string{"fmt", m + "sdk/go/envs"}}, nil},
		{Package{Path: m + "sdk/go/plugin", Imports: []string{m + "internal/envs"}}, []string{"sdk/go/plugin imports internal/envs"}},
		{Package{Path: m + "sdk/go/plugin", TestImports: []string{m + "internal/plugintest"}}, []string{"sdk/go/plugin imports (in a test) internal/plugintest"}},
		{Package{Path: m + "plugins/cartpole", Imports: []string{m + "sdk/go/plugin", m + "plugins/internal/spec"}}, nil},
		{Package{Path: m + "plugins/cartpole", Imports: []string{m + "internal/pluginhost"}}, []string{"plugins/cartpole imports internal/pluginhost"}},
		{Package{Path: m + "plugins/kinrow", Imports: []string{m + "api"}}, []string{"plugins/kinrow imports api"}},
		{Package{Path: m + "internal/pluginhost", Imports: []string{m + "sdk/go/envs", m + "internal/objstore"}}, nil},
		{Package{Path: m + "internal/admission", Imports: []string{m + "policies"}}, nil},
		{Package{Path: m + "policies", Imports: []string{m + "internal/config"}}, []string{"policies imports internal/config"}},
		{Package{Path: m + "internal/pluginhost", Imports: []string{m + "plugins/cartpole"}}, []string{"internal/pluginhost imports plugins/cartpole"}},
		{Package{Path: m + "internal/training", Imports: []string{m + "workflows/train"}}, []string{"internal/training imports workflows/train"}},
		{Package{Path: m + "internal/e2e", TestImports: []string{m + "api", m + "plugins/arithmetic/problem"}}, nil},
		{Package{Path: m + "cmd/trainyard", Imports: []string{m + "api", m + "internal/pluginhost", m + "plugins/builtin"}}, nil},
		{Package{Path: m + "workflows/train", Imports: []string{m + "api"}}, []string{"workflows/train imports api"}},
		{Package{Path: m + "api", Imports: []string{m + "cmd/trainyard"}}, []string{"api imports cmd/trainyard"}},
		{Package{Path: m + "api", Imports: []string{m + "workflows/train", m + "internal/auth", m + "policies"}}, nil},
	} {
		if got := Violations(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.p.Path, got, tc.want)
		}
	}
}
