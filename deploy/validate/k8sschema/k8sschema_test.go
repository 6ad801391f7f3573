package k8sschema

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/yannh/kubeconform/pkg/resource"
	"github.com/yannh/kubeconform/pkg/validator"
)

func TestGVKFileName(t *testing.T) {
	for _, tc := range []struct {
		gvk  GVK
		want string
	}{
		{GVK{"", "v1", "ConfigMap"}, "configmap-v1.json"},
		{GVK{"apps", "v1", "DaemonSet"}, "daemonset-apps-v1.json"},
		{GVK{"networking.k8s.io", "v1", "Ingress"}, "ingress-networking-v1.json"},
		{GVK{"rbac.authorization.k8s.io", "v1", "ClusterRole"}, "clusterrole-rbac-v1.json"},
	} {
		if got := tc.gvk.FileName(); got != tc.want {
			t.Errorf("%+v: FileName() = %q, want %q", tc.gvk, got, tc.want)
		}
	}
}

func TestConvert(t *testing.T) {
	def := map[string]any{
		"description":            "drop me",
		"x-kubernetes-list-type": "atomic",
		"type":                   "object",
		"required":               []any{"port"},
		"properties": map[string]any{
			// A property may be named like a keyword; it stays.
			"description": map[string]any{"type": "string", "description": "the text"},
			"port":        map[string]any{"type": "string", "format": "int-or-string"},
			"labels":      map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
			"nested":      map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "integer"}}},
		},
	}
	for _, tc := range []struct {
		strict bool
		want   string
	}{
		{false, `{"properties":{"description":{"type":"string"},"labels":{"additionalProperties":{"type":"string"},"type":"object"},"nested":{"properties":{"a":{"type":"integer"}},"type":"object"},"port":{"oneOf":[{"type":"string"},{"type":"integer"}]}},"required":["port"],"type":"object"}`},
		{true, `{"additionalProperties":false,"properties":{"description":{"type":"string"},"labels":{"additionalProperties":{"type":"string"},"type":"object"},"nested":{"additionalProperties":false,"properties":{"a":{"type":"integer"}},"type":"object"},"port":{"oneOf":[{"type":"string"},{"type":"integer"}]}},"required":["port"],"type":"object"}`},
	} {
		b, err := json.Marshal(convert("x", def, tc.strict))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("strict=%v:\n got %s\nwant %s", tc.strict, b, tc.want)
		}
	}
}

func TestStandaloneMissingRef(t *testing.T) {
	conv := map[string]any{"a": map[string]any{"properties": map[string]any{"b": map[string]any{"$ref": "#/definitions/nope"}}}}
	if _, err := standalone("a", GVK{Version: "v1", Kind: "A"}, conv); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("standalone with a dangling $ref: err = %v, want one naming it", err)
	}
}

var (
	schemaOnce sync.Once
	schemaDir  string
	schemaErr  error
)

// builtinSchemas writes both variants once per test binary.
func builtinSchemas(t *testing.T) string {
	t.Helper()
	schemaOnce.Do(func() {
		defs, version, err := Builtin()
		if err != nil {
			schemaErr = err
			return
		}
		dir, err := os.MkdirTemp("", "k8s-schemas")
		if err != nil {
			schemaErr = err
			return
		}
		for _, strict := range []bool{false, true} {
			if _, err := Write(dir, version, defs, strict); err != nil {
				schemaErr = err
				return
			}
		}
		schemaDir = dir
	})
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	return schemaDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if schemaDir != "" {
		os.RemoveAll(schemaDir)
	}
	os.Exit(code)
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: REPLICAS
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: web:1
          EXTRA
          resources:
            requests: {cpu: CPU, memory: 26Gi}
          readinessProbe:
            httpGet: {path: /readyz, port: PORT}
`

// manifest fills the deployment template: defaults, overridden by kv
// (placeholder, value, ...).
func manifest(kv ...string) string {
	vals := map[string]string{"REPLICAS": "2", "CPU": "6500m", "PORT": "http", "EXTRA": ""}
	for i := 0; i+1 < len(kv); i += 2 {
		vals[kv[i]] = kv[i+1]
	}
	var pairs []string
	for k, v := range vals {
		pairs = append(pairs, k, v)
	}
	return strings.NewReplacer(pairs...).Replace(deployment)
}

func TestValidateWithBuiltinSchemas(t *testing.T) {
	dir := builtinSchemas(t)
	if _, err := os.Stat(filepath.Join(dir, "v1.21.2-standalone-strict", "deployment-apps-v1.json")); err != nil {
		t.Fatalf("kubeconform's file for apps/v1 Deployment: %v", err)
	}
	with := manifest
	for _, tc := range []struct {
		name    string
		doc     string
		strict  bool
		want    validator.Status
		errPart string
	}{
		{"valid", with(), true, validator.Valid, ""},
		{"cpu as a number", with("CPU", "2"), true, validator.Valid, ""},
		{"numeric probe port", with("PORT", "8080"), true, validator.Valid, ""},
		{"replicas not an integer", with("REPLICAS", `"two"`), true, validator.Invalid, "/spec/replicas"},
		{"unknown field, strict", with("EXTRA", "imagePullPolicie: Always"), true, validator.Invalid, "imagePullPolicie"},
		{"unknown field, not strict", with("EXTRA", "imagePullPolicie: Always"), false, validator.Valid, ""},
		{"port neither string nor integer", with("PORT", "[1]"), true, validator.Invalid, "port"},
		{"missing selector", strings.Replace(with(), "  selector:\n    matchLabels: {app: web}\n", "", 1), true, validator.Invalid, "selector"},
		{"missing containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n", true, validator.Invalid, "containers"},
		{"no such version", strings.Replace(with(), "apps/v1", "apps/v9", 1), true, validator.Error, "could not find schema for Deployment"},
		{"duplicate key, strict", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '1', a: '2'}\n", true, validator.Error, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := validator.New([]string{dir}, validator.Opts{Strict: tc.strict, KubernetesVersion: "1.21.2"})
			if err != nil {
				t.Fatal(err)
			}
			res := v.ValidateResource(resource.Resource{Path: tc.name, Bytes: []byte(tc.doc)})
			if res.Status != tc.want {
				t.Fatalf("status %v, want %v (err %v, errors %v)\n%s", res.Status, tc.want, res.Err, res.ValidationErrors, tc.doc)
			}
			if tc.errPart == "" {
				return
			}
			msg := ""
			if res.Err != nil {
				msg = res.Err.Error()
			}
			for _, e := range res.ValidationErrors {
				msg += " " + e.Path + " " + e.Msg
			}
			if !strings.Contains(msg, tc.errPart) {
				t.Errorf("errors %q do not mention %q", msg, tc.errPart)
			}
		})
	}
}
