// Package k8sschema writes Kubernetes JSON schemas in kubeconform's
// directory layout (<dir>/v<version>-standalone[-strict]/<kind>-<group>-<version>.json)
// from OpenAPI v2 definitions, so manifests validate with no network: the
// schema repository kubeconform downloads from is not reachable here, and no
// package registry we can use ships it. The definitions come from the
// Kubernetes OpenAPI document built into kustomize's kyaml module.
//
// The conversion follows openapi2jsonschema, which produces kubeconform's
// usual schemas: int-or-string and quantities accept numbers as the API
// server does, and the strict variant forbids properties the schema does not
// name.
package k8sschema

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const (
	refPrefix = "#/definitions/"
	quantity  = "io.k8s.apimachinery.pkg.api.resource.Quantity"
)

// GVK is one x-kubernetes-group-version-kind entry of a definition.
type GVK struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// APIVersion is the apiVersion a manifest of this kind carries.
func (g GVK) APIVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

// FileName is kubeconform's name for the kind's schema file:
// {{ .ResourceKind }}{{ .KindSuffix }}.json, where the suffix is the first
// label of the group (or the version of the core group) and the version.
func (g GVK) FileName() string {
	parts := strings.Split(g.APIVersion(), "/")
	suffix := "-" + strings.ToLower(strings.Split(parts[0], ".")[0])
	if len(parts) > 1 {
		suffix += "-" + strings.ToLower(parts[1])
	}
	return strings.ToLower(g.Kind) + suffix + ".json"
}

// Definitions are OpenAPI v2 definitions by name, as decoded from JSON.
type Definitions map[string]map[string]any

// DirName is the folder kubeconform reads for version (e.g. "v1.21.2") with
// or without -strict.
func DirName(version string, strict bool) string {
	d := version + "-standalone"
	if strict {
		d += "-strict"
	}
	return d
}

// Write writes one schema file per kind into dir/DirName(version, strict)
// and returns how many it wrote. Each file holds the kind's schema and the
// definitions it references, so it stands alone.
func Write(dir, version string, defs Definitions, strict bool) (int, error) {
	conv := make(map[string]any, len(defs))
	for name, d := range defs {
		conv[name] = convert(name, d, strict)
	}
	out := filepath.Join(dir, DirName(version, strict))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, fmt.Errorf("k8s schemas: %w", err)
	}
	names := make([]string, 0, len(defs))
	for name := range defs {
		names = append(names, name)
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		gvks, err := gvksOf(defs[name])
		if err != nil {
			return n, fmt.Errorf("k8s schemas: definition %s: %w", name, err)
		}
		for _, g := range gvks {
			doc, err := standalone(name, g, conv)
			if err != nil {
				return n, fmt.Errorf("k8s schemas: %s %s: %w", g.APIVersion(), g.Kind, err)
			}
			b, err := json.Marshal(doc)
			if err != nil {
				return n, fmt.Errorf("k8s schemas: %s %s: %w", g.APIVersion(), g.Kind, err)
			}
			if err := os.WriteFile(filepath.Join(out, g.FileName()), b, 0o644); err != nil {
				return n, fmt.Errorf("k8s schemas: %w", err)
			}
			n++
		}
	}
	return n, nil
}

func gvksOf(def map[string]any) ([]GVK, error) {
	raw, ok := def["x-kubernetes-group-version-kind"]
	if !ok {
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var gvks []GVK
	if err := json.Unmarshal(b, &gvks); err != nil {
		return nil, fmt.Errorf("x-kubernetes-group-version-kind: %w", err)
	}
	return gvks, nil
}

// standalone is the kind's converted schema with apiVersion and kind pinned
// and every definition it reaches under "definitions".
func standalone(name string, g GVK, conv map[string]any) (map[string]any, error) {
	root, ok := deepCopy(conv[name]).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("definition %s is not an object", name)
	}
	if props, ok := root["properties"].(map[string]any); ok {
		// One file per kind: a manifest of another kind or version that
		// reached this file by mistake fails instead of passing.
		if _, ok := props["apiVersion"]; ok {
			props["apiVersion"] = map[string]any{"type": "string", "enum": []any{g.APIVersion()}}
		}
		if _, ok := props["kind"]; ok {
			props["kind"] = map[string]any{"type": "string", "enum": []any{g.Kind}}
		}
	}
	reached := map[string]any{}
	var walkErr error
	var visit func(v any)
	visit = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				target := strings.TrimPrefix(ref, refPrefix)
				if target == ref {
					walkErr = fmt.Errorf("unsupported $ref %q", ref)
					return
				}
				if _, seen := reached[target]; !seen {
					d, ok := conv[target]
					if !ok {
						walkErr = fmt.Errorf("$ref to missing definition %s", target)
						return
					}
					reached[target] = d
					visit(d)
				}
			}
			for _, c := range x {
				visit(c)
			}
		case []any:
			for _, c := range x {
				visit(c)
			}
		}
	}
	visit(root)
	if walkErr != nil {
		return nil, walkErr
	}
	if len(reached) > 0 {
		root["definitions"] = reached
	}
	return root, nil
}

// convert returns a JSON Schema for one OpenAPI definition: descriptions and
// vendor extensions dropped (they do not validate), int-or-string and
// quantities widened to what the API server accepts, and, when strict,
// additionalProperties: false on every object that lists its properties.
func convert(name string, def map[string]any, strict bool) map[string]any {
	if name == quantity {
		// Quantities are strings in the OpenAPI document, but the API
		// server also takes plain numbers (cpu: 2).
		return map[string]any{"oneOf": []any{
			map[string]any{"type": "string"},
			map[string]any{"type": "number"},
		}}
	}
	return convertNode(def, strict).(map[string]any)
}

func convertNode(v any, strict bool) any {
	switch x := v.(type) {
	case map[string]any:
		if x["format"] == "int-or-string" {
			return map[string]any{"oneOf": []any{
				map[string]any{"type": "string"},
				map[string]any{"type": "integer"},
			}}
		}
		out := make(map[string]any, len(x))
		for k, c := range x {
			switch {
			case k == "description", strings.HasPrefix(k, "x-"):
				continue
			case k == "properties":
				// Property names are data, not keywords: convert only
				// their schemas.
				props := map[string]any{}
				for pn, ps := range c.(map[string]any) {
					props[pn] = convertNode(ps, strict)
				}
				out[k] = props
			default:
				out[k] = convertNode(c, strict)
			}
		}
		if _, hasProps := x["properties"]; strict && hasProps {
			if _, set := x["additionalProperties"]; !set {
				out["additionalProperties"] = false
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = convertNode(c, strict)
		}
		return out
	default:
		return v
	}
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			out[k] = deepCopy(c)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = deepCopy(c)
		}
		return out
	default:
		return v
	}
}
