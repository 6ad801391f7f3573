// Package spec converts a native envs.Spec to plugin SDK metadata, so the
// shipped plugins declare exactly the spaces of their native references.
package spec

import (
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/plugin"
)

// Metadata is the env plugin metadata for s.
func Metadata(s envs.Spec, version, description string) plugin.Metadata {
	return plugin.Metadata{
		Name:            s.Name,
		Version:         version,
		Description:     description,
		Observation:     s.Observation,
		Action:          s.Action,
		MaxEpisodeSteps: s.MaxEpisodeSteps,
		Agents:          s.Agents,
		ActionMask:      s.ActionMask,
	}
}
