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
	clients, err := endpointClients(in.RunID, c.HTTP, in.Endpoints)
	if err != nil {
		return pluginhost.Grants{}, err
	}
	m := map[string]*inference.Client{}
	for _, cl := range clients {
		m[cl.Endpoint().Name] = cl
	}
	return pluginhost.Grants{HTTP: pluginhost.NewHTTPGrant(in.RunID, m, pluginhost.HTTPLimits{Rate: c.HTTPRate, Burst: c.HTTPBurst})}, nil
}

// endpointClients are clients of the named endpoints, in order, from the
// definitions the run carries.
func endpointClients(run string, names []string, defs []inference.Endpoint) ([]*inference.Client, error) {
	byName := map[string]inference.Endpoint{}
	for _, e := range defs {
		byName[e.Name] = e
	}
	var out []*inference.Client
	for _, name := range names {
		e, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("run %s: capabilities.http grants endpoint %q but the cluster declares no such endpoint: %w", run, name, ErrFatal)
		}
		cl, err := inference.NewClient(e, inference.ClientOptions{})
		if err != nil {
			return nil, fmt.Errorf("run %s: endpoint %s: %w: %w", run, name, ErrFatal, err)
		}
		out = append(out, cl)
	}
	return out, nil
}
