// Package config gives every trainyard command one precedence for its
// settings: command-line flag, then environment variable, then the YAML
// config file, then the flag's default.
//
// The environment variable for flag --temporal-address is
// TRAINYARD_TEMPORAL_ADDRESS; the YAML key is the flag name itself
// (temporal-address: host:7233). Unknown YAML keys are an error, so a typo
// never silently falls back to a default.
package config

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// EnvPrefix starts every environment variable trainyard reads for flags.
const EnvPrefix = "TRAINYARD_"

// EnvName is the environment variable that sets flag name.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Apply fills each flag in fs that was not given on the command line from
// the environment or, failing that, from the YAML file (skipped when file
// is empty). lookupEnv is os.LookupEnv outside tests.
func Apply(fs *pflag.FlagSet, file string, lookupEnv func(string) (string, bool)) error {
	fromFile := map[string]any{}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("config file: %w", err)
		}
		if err := yaml.Unmarshal(b, &fromFile); err != nil {
			return fmt.Errorf("config file %s: %w", file, err)
		}
		var unknown []string
		for k := range fromFile {
			if fs.Lookup(k) == nil {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return fmt.Errorf("config file %s: unknown setting(s) %s", file, strings.Join(unknown, ", "))
		}
	}
	var errs []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		if v, ok := lookupEnv(EnvName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", EnvName(f.Name), v, err))
			}
			return
		}
		v, ok := fromFile[f.Name]
		if !ok {
			return
		}
		if err := setFromYAML(f, v); err != nil {
			errs = append(errs, fmt.Sprintf("config file %s: %s: %v", file, f.Name, err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func setFromYAML(f *pflag.Flag, v any) error {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = fmt.Sprint(p)
		}
		return f.Value.Set(strings.Join(parts, ","))
	case nil:
		return nil
	default:
		return f.Value.Set(fmt.Sprint(x))
	}
}
