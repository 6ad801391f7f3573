package training

import (
	"fmt"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/plugins"
)

// grants builds the capabilities a run's env plugin gets on this node: an
// HTTP grant of the endpoints its spec names, with clients whose
// credentials are resolved here, on the agent (docs/llm.md). Nothing is
// granted unless the spec asks.
func grants(in SegmentInput) (plugins.Grants, error) {
	c := in.Spec.Capabilities
	if c == nil || len(c.HTTP) == 0 {
		return plugins.Grants{}, nil
	}
	defs := map[string]inference.Endpoint{}
	for _, e := range in.Endpoints {
		defs[e.Name] = e
	}
	clients := map[string]*inference.Client{}
	for _, name := range c.HTTP {
		e, ok := defs[name]
		if !ok {
			return plugins.Grants{}, fmt.Errorf("run %s: capabilities.http grants endpoint %q but the cluster declares no such endpoint: %w", in.RunID, name, ErrFatal)
		}
		cl, err := inference.NewClient(e, inference.ClientOptions{})
		if err != nil {
			return plugins.Grants{}, fmt.Errorf("run %s: endpoint %s: %w: %w", in.RunID, name, ErrFatal, err)
		}
		clients[name] = cl
	}
	return plugins.Grants{HTTP: plugins.NewHTTPGrant(in.RunID, clients, plugins.HTTPLimits{Rate: c.HTTPRate, Burst: c.HTTPBurst})}, nil
}
