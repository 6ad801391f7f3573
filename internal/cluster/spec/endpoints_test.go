package spec

import (
	"strings"
	"testing"
)

const endpointNodes = `name: llm-lab
nodes:
- {name: g5-1, resources: {gpus: "1xA10G:24GB"}, provisioner: {kind: static}}
- {name: cpu-1, provisioner: {kind: static}}
`

func TestEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name      string
		endpoints string
		want      []string // substrings of the error; none: valid
	}{
		{"served by a GPU node", `
- {name: llm, url: "http://g5-1:8000", model: llama-4-scout, credentials_ref: "env:LLM_KEY", max_concurrency: 100, nodes: [g5-1], gpus: 1, type: vllm}
- {name: judge, url: "https://api.example.com", model: judge-1}
`, nil},
		{"unknown node", `
- {name: llm, url: "http://x:8000", model: m, nodes: [g5-9], gpus: 1}
`, []string{`cluster: endpoints[llm].nodes: node "g5-9" is not in the cluster`}},
		{"more GPUs than the node", `
- {name: llm, url: "http://x:8000", model: m, nodes: [g5-1], gpus: 2}
`, []string{`endpoints[llm].gpus: 2 GPUs per node but node "g5-1" has 1`}},
		{"duplicate", `
- {name: llm, url: "http://x:8000", model: m}
- {name: llm, url: "http://y:8000", model: m}
`, []string{`endpoints[llm].name: duplicate endpoint name`}},
		{"secret inline", `
- {name: llm, url: "http://x:8000", model: m, credentials_ref: "sk-live-123"}
`, []string{`endpoints[llm].definition`, `credentials_ref`}},
		{"unknown field", `
- {name: llm, url: "http://x:8000", model: m, api_key: "sk-live-123"}
`, []string{`api_key`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(endpointNodes + "endpoints:" + tc.endpoints))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if e, ok := c.Endpoint("llm"); !ok || e.MaxConcurrency != 100 || e.Nodes[0] != "g5-1" {
					t.Fatalf("endpoint llm: %+v, %v", e, ok)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
