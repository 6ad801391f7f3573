package spec

import (
	"fmt"
	"strings"

	"github.com/trainyard/trainyard/internal/inference"
)

// validateEndpoints checks the cluster's inference endpoints: each is a
// valid definition, names are unique, and the nodes serving one exist and
// have the GPUs it claims (GPU preservation reserves the lowest indices).
func (c *Cluster) validateEndpoints() []error {
	var errs []error
	fail := func(i int, e inference.Endpoint, field, format string, a ...any) {
		ref := e.Name
		if ref == "" {
			ref = fmt.Sprintf("#%d", i+1)
		}
		errs = append(errs, &FieldError{Field: fmt.Sprintf("endpoints[%s].%s", ref, field), Msg: fmt.Sprintf(format, a...)})
	}
	seen := map[string]bool{}
	for i, e := range c.Endpoints {
		if err := e.Validate(); err != nil {
			msg, _ := strings.CutPrefix(err.Error(), inference.ErrInvalidEndpoint.Error()+" ")
			fail(i, e, "definition", "%s", msg)
		}
		if seen[e.Name] {
			fail(i, e, "name", "duplicate endpoint name")
		}
		seen[e.Name] = true
		for _, name := range e.Nodes {
			n, ok := c.Node(name)
			switch {
			case !ok:
				fail(i, e, "nodes", "node %q is not in the cluster", name)
			case n.Resources.GPUs != nil && e.GPUs > len(n.Resources.GPUs):
				fail(i, e, "gpus", "%d GPUs per node but node %q has %d", e.GPUs, name, len(n.Resources.GPUs))
			}
		}
	}
	return errs
}

// Endpoint looks an inference endpoint up by name.
func (c *Cluster) Endpoint(name string) (inference.Endpoint, bool) {
	for _, e := range c.Endpoints {
		if e.Name == name {
			return e, true
		}
	}
	return inference.Endpoint{}, false
}
