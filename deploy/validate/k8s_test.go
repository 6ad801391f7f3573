package validate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The parts of rendered manifests these checks read.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	NodeSelector map[string]string `yaml:"nodeSelector"`
	Tolerations  []struct {
		Key, Operator, Effect string
	} `yaml:"tolerations"`
	Affinity struct {
		NodeAffinity struct {
			Required struct {
				Terms []struct {
					MatchExpressions []struct {
						Key      string   `yaml:"key"`
						Operator string   `yaml:"operator"`
						Values   []string `yaml:"values"`
					} `yaml:"matchExpressions"`
				} `yaml:"nodeSelectorTerms"`
			} `yaml:"requiredDuringSchedulingIgnoredDuringExecution"`
		} `yaml:"nodeAffinity"`
		PodAntiAffinity struct {
			Required []struct {
				TopologyKey   string `yaml:"topologyKey"`
				LabelSelector struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"labelSelector"`
			} `yaml:"requiredDuringSchedulingIgnoredDuringExecution"`
		} `yaml:"podAntiAffinity"`
	} `yaml:"affinity"`
	Containers []container `yaml:"containers"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name string `yaml:"name"`
	} `yaml:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

// render runs kustomize (the library `kustomize build` is) on a directory.
func render(t *testing.T, dir string) []object {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	b, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var out []object
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		out = append(out, o)
	}
	return out
}

var kustomizations = []string{"base", "overlays/g5-pool"}

func TestKubernetesContainersMatchTrainyard(t *testing.T) {
	cmds := commands(t)
	for _, k := range kustomizations {
		t.Run(k, func(t *testing.T) {
			objs := render(t, repo("deploy", "k8s", k))
			configMaps := map[string]map[string]string{}
			for _, o := range objs {
				if o.Kind == "ConfigMap" {
					configMaps[o.Metadata.Name] = o.Data
				}
			}
			workloads := 0
			for _, o := range objs {
				if o.Kind != "Deployment" && o.Kind != "DaemonSet" {
					continue
				}
				workloads++
				for _, c := range o.Spec.Template.Spec.Containers {
					where := fmt.Sprintf("%s %s/%s container %s", k, o.Kind, o.Metadata.Name, c.Name)
					if len(c.Command) > 0 {
						t.Errorf("%s: command overrides the image's trainyard entrypoint", where)
					}
					env := map[string]bool{}
					for _, e := range c.Env {
						env[e.Name] = true
					}
					for _, ef := range c.EnvFrom {
						if ef.ConfigMapRef == nil {
							continue // Secrets are made out of band
						}
						data, ok := configMaps[ef.ConfigMapRef.Name]
						if !ok {
							t.Errorf("%s: envFrom ConfigMap %s is not rendered", where, ef.ConfigMapRef.Name)
						}
						for key := range data {
							env[key] = true
						}
					}
					checkInvocation(t, cmds, invocation{where: where, args: c.Args, env: env})
				}
			}
			if workloads != 3 {
				t.Errorf("%d workloads, want server, worker and agent", workloads)
			}
		})
	}
}

func quantity(t *testing.T, where, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatalf("%s: %q: %v", where, s, err)
	}
	return q
}

// Seed 000's pool: g5.2xlarge nodes, 7.5 allocatable CPUs and 30 GiB; the
// agent takes 80-90% of both, spreads one per node, claims no GPU (they
// serve LLM inference) and the control plane stays off those nodes.
func TestG5PoolPlacement(t *testing.T) {
	const cpus, mem = 7.5, 30 << 30
	var agent, server, worker *object
	objs := render(t, repo("deploy", "k8s", "overlays", "g5-pool"))
	for i, o := range objs {
		switch o.Metadata.Name {
		case "trainyard-agent":
			if o.Kind == "DaemonSet" {
				agent = &objs[i]
			}
		case "trainyard-server":
			if o.Kind == "Deployment" {
				server = &objs[i]
			}
		case "trainyard-worker":
			worker = &objs[i]
		}
	}
	if agent == nil || server == nil || worker == nil {
		t.Fatalf("agent DaemonSet, server and worker Deployments not all rendered")
	}
	pod := agent.Spec.Template.Spec
	if got := pod.NodeSelector["node.kubernetes.io/instance-type"]; got != "g5.2xlarge" || len(pod.NodeSelector) != 1 {
		t.Errorf("agent nodeSelector %v, want only instance-type g5.2xlarge", pod.NodeSelector)
	}
	tolerates := false
	for _, tol := range pod.Tolerations {
		tolerates = tolerates || (tol.Key == "nvidia.com/gpu" && tol.Operator == "Exists")
	}
	if !tolerates {
		t.Errorf("agent does not tolerate the nvidia.com/gpu taint: %+v", pod.Tolerations)
	}
	spread := false
	for _, term := range pod.Affinity.PodAntiAffinity.Required {
		sel := term.LabelSelector.MatchLabels
		selectsSelf := len(sel) > 0
		for k, v := range sel {
			selectsSelf = selectsSelf && agent.Spec.Template.Metadata.Labels[k] == v
		}
		spread = spread || (term.TopologyKey == "kubernetes.io/hostname" && selectsSelf)
	}
	if !spread {
		t.Errorf("agent has no required anti-affinity to itself per hostname: %+v", pod.Affinity.PodAntiAffinity)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("agent pod has %d containers, want 1", len(pod.Containers))
	}
	res := pod.Containers[0].Resources
	for _, tc := range []struct {
		name     string
		capacity float64
	}{{"cpu", cpus}, {"memory", mem}} {
		req := quantity(t, "agent requests."+tc.name, res.Requests[tc.name])
		if f := req.AsApproximateFloat64() / tc.capacity; f < 0.8 || f > 0.9 {
			t.Errorf("agent requests %s %s = %.0f%% of a g5.2xlarge, want 80-90%%", tc.name, res.Requests[tc.name], 100*f)
		}
	}
	lim, ok := res.Limits["memory"]
	if ok {
		q := quantity(t, "agent limits.memory", lim)
		ok = q.AsApproximateFloat64() <= mem
	}
	if !ok {
		t.Errorf("agent memory limit %q: want one, within the node", lim)
	}
	for name := range res.Requests {
		if strings.Contains(name, "gpu") {
			t.Errorf("agent requests %s: GPUs are kept for inference", name)
		}
	}
	for name := range res.Limits {
		if strings.Contains(name, "gpu") {
			t.Errorf("agent limits %s: GPUs are kept for inference", name)
		}
	}
	for _, d := range []*object{server, worker} {
		off := false
		for _, term := range d.Spec.Template.Spec.Affinity.NodeAffinity.Required.Terms {
			for _, e := range term.MatchExpressions {
				off = off || (e.Key == "node.kubernetes.io/instance-type" && e.Operator == "NotIn" && strings.Contains(strings.Join(e.Values, ","), "g5.2xlarge"))
			}
		}
		if !off {
			t.Errorf("%s may be scheduled on the g5 nodes", d.Metadata.Name)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; !strings.Contains(img, "/") || !strings.Contains(img, ":") {
			t.Errorf("%s image %q: want a registry image with a tag", d.Metadata.Name, img)
		}
	}
}
