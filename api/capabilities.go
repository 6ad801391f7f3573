package api

import (
	"fmt"
	"slices"

	"github.com/danielgtaylor/huma/v2"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// grantedEndpoints resolves a run's capabilities.http against its cluster:
// every granted endpoint must be declared by the cluster and by the env
// plugin's metadata (http:<name>), and a loop's llm.remote.endpoint must be
// a trainer the cluster declares. The definitions travel with the run to
// the agent, which resolves their credentials itself: the references are
// always an admin's (the cluster spec), never the run's.
func grantedEndpoints(spec training.Spec, st cluster.Status, env pluginhost.Metadata) ([]inference.Endpoint, error) {
	eps, err := pluginEndpoints(spec, st, env)
	if err != nil || spec.LLM == nil || spec.LLM.Remote == nil {
		return eps, err
	}
	name := spec.LLM.Remote.Endpoint
	j := slices.IndexFunc(st.Endpoints, func(e inference.Endpoint) bool { return e.Name == name && e.Type == inference.TypeTrainer })
	if j < 0 {
		return nil, huma.Error422UnprocessableEntity("remote trainer not declared", &huma.ErrorDetail{Location: "body.llm.remote.endpoint", Value: name,
			Message: fmt.Sprintf("cluster %s declares no endpoint %q of type trainer (an admin declares the trainer's URL and credentials in the cluster spec)", spec.Cluster, name)})
	}
	return append(eps, st.Endpoints[j]), nil
}

// pluginEndpoints is capabilities.http resolved: what the env plugin may call.
func pluginEndpoints(spec training.Spec, st cluster.Status, env pluginhost.Metadata) ([]inference.Endpoint, error) {
	declared := env.DeclaredEndpoints(pluginhost.CapHTTP)
	if spec.Capabilities == nil || len(spec.Capabilities.HTTP) == 0 {
		if len(declared) > 0 {
			// It would be refused at load on the agent: say so now.
			return nil, huma.Error422UnprocessableEntity("capabilities not granted", &huma.ErrorDetail{Location: "body.capabilities.http",
				Message: fmt.Sprintf("env plugin %s calls inference endpoints %v: grant them with capabilities.http (endpoints of cluster %s)", env.Label(), declared, spec.Cluster)})
		}
		return nil, nil
	}
	var out []inference.Endpoint
	var details []error
	for i, name := range spec.Capabilities.HTTP {
		loc := fmt.Sprintf("body.capabilities.http[%d]", i)
		j := slices.IndexFunc(st.Endpoints, func(e inference.Endpoint) bool { return e.Name == name })
		if j < 0 {
			names := make([]string, 0, len(st.Endpoints))
			for _, e := range st.Endpoints {
				names = append(names, e.Name)
			}
			details = append(details, &huma.ErrorDetail{Location: loc, Value: name,
				Message: fmt.Sprintf("cluster %s declares no endpoint %q (declared: %v)", spec.Cluster, name, names)})
			continue
		}
		if st.Endpoints[j].Type == inference.TypeTrainer {
			details = append(details, &huma.ErrorDetail{Location: loc, Value: name,
				Message: fmt.Sprintf("endpoint %q is a trainer: a loop names it in llm.remote.endpoint; plugins are not granted it", name)})
			continue
		}
		if !slices.Contains(declared, name) {
			details = append(details, &huma.ErrorDetail{Location: loc, Value: name,
				Message: fmt.Sprintf("env plugin %s does not declare capability http:%s (it declares %v)", env.Label(), name, env.Capabilities)})
			continue
		}
		out = append(out, st.Endpoints[j])
	}
	if len(details) > 0 {
		return nil, huma.Error422UnprocessableEntity("capabilities not grantable", details...)
	}
	return out, nil
}

// runCapabilities puts a run's grants and its env plugin's declared
// capabilities into the admission input (policies/capabilities.rego).
func runCapabilities(spec training.Spec, env pluginhost.Metadata) func(*policy.Input) {
	return func(in *policy.Input) {
		if c := spec.Capabilities; c != nil {
			in.Work.Capabilities = &policy.Capabilities{HTTP: c.HTTP, HTTPRate: c.HTTPRate}
		}
		in.Work.PluginCapabilities = env.Capabilities
	}
}
