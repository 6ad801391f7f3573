package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Provisioner says how the node's agent is started: its kind, and that
// kind's own settings (`provisioner: {kind: ssh, ssh: {...}}`).
type Provisioner struct {
	Kind string
	// Settings is the kind's section as JSON (nil: none given). The spec
	// does not know its fields: the kind's package decodes and checks it
	// (Kind.Check), and reads it when it starts the agent.
	Settings json.RawMessage
}

// Kind is a provisioner kind as the spec knows it. Each kind is one package
// (internal/provision/local, ssh, static) that registers itself; the spec,
// the cluster workflow, the API and the CLI know kinds only through this.
type Kind struct {
	Name string
	// Check reports problems of a node of this kind: its settings section
	// and what the kind needs of the node (an address). Fields are the
	// node's ("address", "provisioner.ssh.port").
	Check func(n Node, fail func(field, format string, a ...any))
	// CheckCluster reports problems among the cluster's nodes of this kind
	// (local nodes that share one machine must not share a GPU).
	CheckCluster func(nodes []Node, fail func(node, field, format string, a ...any))
	// SharesMachine: agents of this kind run on the control plane's
	// machine, so each is told the resources its spec gives it.
	SharesMachine bool
	// StartedByOperator: nothing starts this kind's agents (systemd units,
	// a DaemonSet); `cluster up` prints their join commands.
	StartedByOperator bool
}

var kinds struct {
	sync.RWMutex
	m map[string]Kind
}

// Register adds a provisioner kind; each kind's package calls it from init.
func Register(k Kind) {
	kinds.Lock()
	defer kinds.Unlock()
	if kinds.m == nil {
		kinds.m = map[string]Kind{}
	}
	if _, dup := kinds.m[k.Name]; dup {
		panic("provisioner kind " + k.Name + " registered twice")
	}
	kinds.m[k.Name] = k
}

// LookupKind returns a registered kind.
func LookupKind(name string) (Kind, bool) {
	kinds.RLock()
	defer kinds.RUnlock()
	k, ok := kinds.m[name]
	return k, ok
}

// Kinds lists the registered kinds' names, sorted.
func Kinds() []string {
	kinds.RLock()
	defer kinds.RUnlock()
	out := make([]string, 0, len(kinds.m))
	for name := range kinds.m {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// MarshalJSON writes {"kind": K, K: settings}, the file's shape.
func (p Provisioner) MarshalJSON() ([]byte, error) {
	m := map[string]json.RawMessage{}
	k, err := json.Marshal(p.Kind)
	if err != nil {
		return nil, err
	}
	m["kind"] = k
	if len(p.Settings) > 0 && p.Kind != "" && p.Kind != "kind" {
		m[p.Kind] = p.Settings
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads {"kind": K, K: settings}. Sections of other kinds
// are ignored here (the file parser refuses them, naming the field).
func (p *Provisioner) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*p = Provisioner{}
	if raw, ok := m["kind"]; ok {
		if err := json.Unmarshal(raw, &p.Kind); err != nil {
			return fmt.Errorf("provisioner.kind: %w", err)
		}
	}
	if s, ok := m[p.Kind]; ok && p.Kind != "kind" && !bytes.Equal(bytes.TrimSpace(s), []byte("null")) {
		p.Settings = slices.Clone(s)
	}
	return nil
}

// DecodeSettings decodes n's settings section into v, refusing unknown
// fields; nothing given leaves v as it is. For the kinds' packages.
func DecodeSettings(n Node, v any) error {
	if len(n.Provisioner.Settings) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(n.Provisioner.Settings))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// EncodeSettings makes v a node's settings section. For the kinds'
// packages and tests that build nodes in code.
func EncodeSettings(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("provisioner settings %T: %v", v, err))
	}
	return b
}
