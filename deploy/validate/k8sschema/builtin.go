package k8sschema

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/openapi"
)

// Builtin returns the Kubernetes OpenAPI definitions built into kyaml and
// the Kubernetes version they describe (e.g. "v1.21.2").
func Builtin() (Definitions, string, error) {
	b, err := json.Marshal(openapi.Schema().Definitions)
	if err != nil {
		return nil, "", fmt.Errorf("builtin OpenAPI: %w", err)
	}
	var defs Definitions
	if err := json.Unmarshal(b, &defs); err != nil {
		return nil, "", fmt.Errorf("builtin OpenAPI: %w", err)
	}
	return defs, openapi.DefaultOpenAPI, nil
}
