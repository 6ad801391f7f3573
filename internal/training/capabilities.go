package training

import (
	"fmt"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/pluginhost"
)

// grants builds the capabilities a run's env plugin gets on this node: an
// HTTP grant of the endpoints its spec names, with clients whose
// credentials are resolved here, on the agent (docs/llm.md). Nothing is
// granted unless the spec asks.
func grants(in SegmentInput) (pluginhost.Grants, error) {
	c := in.Spec.Capabilities
	if c == nil || len(c.HTTP) == 0 {
		return pluginhost.Grants{}, nil
	}
	defs := map[string]inference.Endpoint{}
	for _, e := range in.Endpoints {
		defs[e.Name] = e
	}
	clients := map[string]*inference.Client{}
	for _, name := range c.HTTP {
		e, ok := defs[name]
		if !ok {
			return pluginhost.Grants{}, fmt.Errorf("run %s: capabilities.http grants endpoint %q but the cluster declares no such endpoint: %w", in.RunID, name, ErrFatal)
		}
		cl, err := inference.NewClient(e, inference.ClientOptions{})
		if err != nil {
			return pluginhost.Grants{}, fmt.Errorf("run %s: endpoint %s: %w: %w", in.RunID, name, ErrFatal, err)
		}
		clients[name] = cl
	}
	return pluginhost.Grants{HTTP: pluginhost.NewHTTPGrant(in.RunID, clients, pluginhost.HTTPLimits{Rate: c.HTTPRate, Burst: c.HTTPBurst})}, nil
}
