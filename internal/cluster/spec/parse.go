package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/trainyard/trainyard/internal/agent/detect/gpudesc"
	"github.com/trainyard/trainyard/internal/agent/preempt"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/names"
	"github.com/trainyard/trainyard/internal/resources"
)

// The file format. Kept apart from Cluster so the in-memory form is plain
// resources.Capacity while the file accepts "64GiB" and GPU descriptions.
type fileSpec struct {
	Name      string               `yaml:"name"`
	Defaults  fileNode             `yaml:"defaults"`
	Nodes     []fileNode           `yaml:"nodes"`
	Endpoints []inference.Endpoint `yaml:"endpoints"`
}

type fileNode struct {
	Name        string            `yaml:"name"`
	Address     string            `yaml:"address"`
	Provider    string            `yaml:"provider"`
	Labels      map[string]string `yaml:"labels"`
	Ephemeral   *bool             `yaml:"ephemeral"`
	Preemption  string            `yaml:"preemption_notice"`
	JobUser     string            `yaml:"job_user"`
	Resources   fileResources     `yaml:"resources"`
	Provisioner fileProvisioner   `yaml:"provisioner"`
	line        int
}

type fileResources struct {
	CPUs   float64  `yaml:"cpus"`
	Memory string   `yaml:"memory"`    // "64GiB", or a number of MiB
	MemMB  int64    `yaml:"memory_mb"` // the form Cluster marshals to JSON
	GPUs   gpuField `yaml:"gpus"`
}

// fileProvisioner is `provisioner: {kind: K, K: {...}}`. Sections are
// kept as decoded (a kind's fields are its package's, Kind.Check) so that
// the defaults' section can be merged into a node's field by field.
type fileProvisioner struct {
	Kind     string
	Sections map[string]map[string]any
}

func (p *fileProvisioner) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: provisioner must be a mapping like {kind: ssh}", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		if key == "kind" {
			if err := val.Decode(&p.Kind); err != nil {
				return fmt.Errorf("line %d: provisioner.kind: %w", val.Line, unLine(err))
			}
			continue
		}
		var sec map[string]any
		if err := val.Decode(&sec); err != nil {
			return fmt.Errorf("line %d: provisioner.%s must be a mapping of settings", val.Line, key)
		}
		if p.Sections == nil {
			p.Sections = map[string]map[string]any{}
		}
		p.Sections[key] = sec
	}
	return nil
}

// gpuField is a gpudesc string ("3xTITAN X:12GB") or a list of
// {index, model, vram_mb} (the JSON form the API returns).
type gpuField struct {
	desc   string
	list   []resources.GPU
	isList bool
}

func (g *gpuField) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Decode(&g.desc)
	case yaml.SequenceNode:
		g.isList = true
		for _, item := range n.Content {
			var v struct {
				Index  *int   `yaml:"index"`
				Model  string `yaml:"model"`
				VRAMMB int    `yaml:"vram_mb"`
			}
			if err := decodeStrict(item, &v); err != nil {
				return err
			}
			idx := len(g.list)
			if v.Index != nil {
				idx = *v.Index
			}
			g.list = append(g.list, resources.GPU{Index: idx, Model: v.Model, VRAMMB: v.VRAMMB})
		}
		return nil
	}
	return fmt.Errorf("line %d: gpus must be a description string or a list", n.Line)
}

// nodeLines records each node's line for error messages.
func (f *fileNode) UnmarshalYAML(n *yaml.Node) error {
	type plain fileNode
	var p plain
	if err := decodeStrict(n, &p); err != nil {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "name" && n.Content[i+1].Value != "" {
				return fmt.Errorf("node %q: %w", n.Content[i+1].Value, err)
			}
		}
		return err
	}
	*f = fileNode(p)
	f.line = n.Line
	return nil
}

// decodeStrict decodes a subtree rejecting unknown fields (yaml.v3 does not
// carry KnownFields into custom unmarshalers).
func decodeStrict(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	d := yaml.NewDecoder(bytes.NewReader(b))
	d.KnownFields(true)
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, unLine(err))
	}
	return nil
}

// unLine drops yaml's line numbers, which are relative to the re-encoded
// subtree and so misleading, and names unknown fields plainly.
var (
	yamlLineRe    = regexp.MustCompile(`line \d+: `)
	yamlUnknownRe = regexp.MustCompile(`field (\S+) not found in type \S.*`)
)

func unLine(err error) error {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	s = strings.ReplaceAll(s, "unmarshal errors:\n  ", "")
	s = yamlLineRe.ReplaceAllString(s, "")
	s = yamlUnknownRe.ReplaceAllString(s, "unknown field \"$1\"")
	return errors.New(s)
}

// ParseFile reads and parses a spec file.
func ParseFile(path string) (*Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read cluster spec: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse parses and validates a spec in YAML or JSON. The error lists every
// problem found, each naming the node and field (see *FieldError).
func Parse(data []byte) (*Cluster, error) {
	var f fileSpec
	d := yaml.NewDecoder(bytes.NewReader(data))
	d.KnownFields(true)
	if err := d.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("cluster spec is empty")
		}
		return nil, fmt.Errorf("cluster spec: %w", err)
	}
	var errs []error
	c := &Cluster{Name: f.Name, Endpoints: f.Endpoints}
	for i, fn := range f.Nodes {
		n, nodeErrs := f.node(i, fn)
		errs = append(errs, nodeErrs...)
		c.Nodes = append(c.Nodes, n)
	}
	if len(errs) > 0 {
		// Report conversion errors along with structural ones.
		if err := c.Validate(); err != nil {
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// node applies defaults and converts units; Validate checks the result.
func (f *fileSpec) node(i int, fn fileNode) (Node, []error) {
	d := f.Defaults
	n := Node{Name: fn.Name, Address: fn.Address, Provider: fn.Provider}
	ref := fn.Name
	if ref == "" {
		ref = "#" + strconv.Itoa(i+1)
	}
	var errs []error
	fail := func(field, format string, a ...any) {
		errs = append(errs, &FieldError{Node: ref, Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	if n.Provider == "" {
		n.Provider = d.Provider
	}
	if len(d.Labels)+len(fn.Labels) > 0 {
		n.Labels = map[string]string{}
		for k, v := range d.Labels {
			n.Labels[k] = v
		}
		for k, v := range fn.Labels {
			n.Labels[k] = v
		}
	}
	switch {
	case fn.Ephemeral != nil:
		n.Ephemeral = *fn.Ephemeral
	case d.Ephemeral != nil:
		n.Ephemeral = *d.Ephemeral
	}

	n.PreemptionNotice = fn.Preemption
	if n.PreemptionNotice == "" {
		n.PreemptionNotice = d.Preemption
	}
	n.JobUser = fn.JobUser
	if n.JobUser == "" {
		n.JobUser = d.JobUser
	}

	r := fn.Resources
	if r.CPUs == 0 {
		r.CPUs = d.Resources.CPUs
	}
	if r.Memory == "" && r.MemMB == 0 {
		r.Memory, r.MemMB = d.Resources.Memory, d.Resources.MemMB
	}
	if r.GPUs.desc == "" && !r.GPUs.isList {
		r.GPUs = d.Resources.GPUs
	}
	n.Resources.CPUs = r.CPUs
	n.Resources.MemoryMB = r.MemMB
	if r.Memory != "" && r.MemMB != 0 {
		fail("resources.memory", "give memory or memory_mb, not both")
	}
	if r.Memory != "" {
		mb, err := gpudesc.ParseMemoryMB(r.Memory)
		if err != nil {
			fail("resources.memory", "%v", err)
		}
		n.Resources.MemoryMB = mb
	}
	if r.GPUs.isList {
		n.Resources.GPUs = r.GPUs.list
	} else {
		gpus, err := gpudesc.Parse(r.GPUs.desc)
		if err != nil {
			fail("resources.gpus", "%v", err)
		}
		n.Resources.GPUs = gpus
	}

	n.Provisioner = mergeProvisioner(d.Provisioner, fn.Provisioner)
	for key := range fn.Provisioner.Sections {
		switch _, known := LookupKind(key); {
		case key == n.Provisioner.Kind:
		case known:
			fail("provisioner."+key, "%s settings given but the provisioner is %q", key, n.Provisioner.Kind)
		default:
			fail("provisioner."+key, "unknown field (a provisioner's settings go under its kind: %s)", strings.Join(Kinds(), ", "))
		}
	}
	return n, errs
}

// mergeProvisioner fills a node's provisioner from the defaults: all of it
// when the node names none, field by field when both name the same kind.
func mergeProvisioner(d, p fileProvisioner) Provisioner {
	if p.Kind == "" && len(p.Sections) == 0 {
		p = d
	}
	out := Provisioner{Kind: p.Kind}
	if out.Kind == "" {
		out.Kind = d.Kind
	}
	sec := map[string]any{}
	if d.Kind == out.Kind {
		for k, v := range d.Sections[out.Kind] {
			sec[k] = v
		}
	}
	for k, v := range p.Sections[out.Kind] {
		sec[k] = v
	}
	_, given := p.Sections[out.Kind]
	_, defaulted := d.Sections[out.Kind]
	if given || (defaulted && d.Kind == out.Kind) {
		out.Settings = EncodeSettings(sec)
	}
	return out
}

// FieldError is one problem in a spec.
type FieldError struct {
	Node  string // node name, "#N" for an unnamed node, "" for the cluster
	Field string // e.g. "provisioner.kind"
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Node == "" {
		return fmt.Sprintf("cluster: %s: %s", e.Field, e.Msg)
	}
	return fmt.Sprintf("node %q: %s: %s", e.Node, e.Field, e.Msg)
}

var (
	tokenRe    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9_.]{0,62})$`)
	labelKeyRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,62})$`)
)

// Validate checks a cluster (also one built in code or decoded from JSON
// by the API) and returns every problem, joined.
func (c *Cluster) Validate() error {
	var errs []error
	fail := func(node, field, format string, a ...any) {
		errs = append(errs, &FieldError{Node: node, Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	if names.Cluster.Check(c.Name) != nil {
		fail("", "name", "%q must be %s (it names task queues and workflows)", c.Name, names.Cluster.Rule())
	}
	if len(c.Nodes) == 0 {
		fail("", "nodes", "at least one node is required")
	}
	seen := map[string]int{}
	for i, n := range c.Nodes {
		ref := n.Name
		if ref == "" {
			ref = "#" + strconv.Itoa(i+1)
		}
		if names.Node.Check(n.Name) != nil {
			fail(ref, "name", "%q must be %s", n.Name, names.Node.Rule())
		} else if j, dup := seen[strings.ToLower(n.Name)]; dup {
			fail(ref, "name", "duplicate node name (also node #%d)", j+1)
		} else {
			seen[strings.ToLower(n.Name)] = i
		}
		if n.Provider != "" && !tokenRe.MatchString(n.Provider) {
			fail(ref, "provider", "%q must be a lower-case word like lab, vast, runpod, k8s", n.Provider)
		}
		keys := make([]string, 0, len(n.Labels))
		for k := range n.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !labelKeyRe.MatchString(k) {
				fail(ref, "labels", "key %q must be letters, digits, '.', '_', '/' or '-'", k)
			}
			if len(n.Labels[k]) > 253 || strings.ContainsAny(n.Labels[k], "\x00\n") {
				fail(ref, "labels", "value of %q is too long or contains a newline", k)
			}
		}
		if n.PreemptionNotice != "" {
			if _, err := preempt.Parse(n.PreemptionNotice); err != nil {
				fail(ref, "preemption_notice", "%v", err)
			}
		}
		if n.JobUser != "" && names.User.Check(n.JobUser) != nil {
			fail(ref, "job_user", "%q must be %s", n.JobUser, names.User.Rule())
		}
		validateResources(ref, n.Resources, fail)
		validateProvisioner(ref, n, fail)
	}
	for _, name := range Kinds() {
		k, _ := LookupKind(name)
		if k.CheckCluster == nil {
			continue
		}
		var of []Node
		for _, n := range c.Nodes {
			if n.Provisioner.Kind == name {
				of = append(of, n)
			}
		}
		if len(of) > 0 {
			k.CheckCluster(of, fail)
		}
	}
	errs = append(errs, c.validateEndpoints()...)
	return errors.Join(errs...)
}

func validateResources(ref string, r resources.Capacity, fail func(node, field, format string, a ...any)) {
	if r.CPUs < 0 || r.CPUs > 1<<16 {
		fail(ref, "resources.cpus", "%v is out of range", r.CPUs)
	}
	if r.MemoryMB < 0 {
		fail(ref, "resources.memory", "%d MiB is negative", r.MemoryMB)
	}
	idx := map[int]bool{}
	for _, g := range r.GPUs {
		switch {
		case g.Index < 0:
			fail(ref, "resources.gpus", "index %d is negative", g.Index)
		case idx[g.Index]:
			fail(ref, "resources.gpus", "index %d given twice", g.Index)
		case strings.TrimSpace(g.Model) == "" || strings.ContainsAny(g.Model, ",:"):
			fail(ref, "resources.gpus", "GPU %d: model %q must be non-empty without ',' or ':'", g.Index, g.Model)
		case g.VRAMMB <= 0:
			fail(ref, "resources.gpus", "GPU %d: vram must be positive", g.Index)
		}
		idx[g.Index] = true
	}
}

func validateProvisioner(ref string, n Node, fail func(node, field, format string, a ...any)) {
	p := n.Provisioner
	if p.Kind == "" {
		fail(ref, "provisioner.kind", "missing (want %s)", strings.Join(Kinds(), ", "))
		return
	}
	k, ok := LookupKind(p.Kind)
	if !ok {
		fail(ref, "provisioner.kind", "unknown provisioner %q (want %s)", p.Kind, strings.Join(Kinds(), ", "))
		return
	}
	if k.Check != nil {
		k.Check(n, func(field, format string, a ...any) { fail(ref, field, format, a...) })
	}
}
