package selfplay

import (
	"maps"
	"slices"
	"sort"

	"github.com/trainyard/trainyard/internal/selfplay/populate"
)

// ConfigQueue is one config's self-play work on a cluster.
type ConfigQueue struct {
	Config    string          `json:"config"`
	Loop      string          `json:"loop" doc:"CLUSTER/CONFIG."`
	Populated bool            `json:"populated" doc:"Driven by the cluster's queue populator (else a plain loop running whole generations)."`
	Queued    populate.Counts `json:"queued" doc:"Work items waiting, by kind."`
	Running   string          `json:"running,omitempty" doc:"The kind running now."`
	Done      populate.Counts `json:"done" doc:"Work done by kind."`
	Actual    populate.Mix    `json:"actual" doc:"Share of each kind among the work done and queued."`
}

// ClusterQueue is a cluster's self-play work.
type ClusterQueue struct {
	Cluster   string          `json:"cluster"`
	Populator string          `json:"populator,omitempty" doc:"The populator's status, when the cluster has one."`
	Configs   []ConfigQueue   `json:"configs"`
	Queued    populate.Counts `json:"queued"`
	Running   populate.Counts `json:"running"`
	Done      populate.Counts `json:"done"`
	Depth     int             `json:"depth" doc:"Work items queued or running."`
	Target    populate.Mix    `json:"target"`
	Actual    populate.Mix    `json:"actual"`
}

// QueueStatus is every cluster's self-play work.
type QueueStatus struct {
	Clusters []ClusterQueue  `json:"clusters"`
	Queued   populate.Counts `json:"queued"`
	Running  populate.Counts `json:"running"`
	Target   populate.Mix    `json:"target" doc:"The seed's mix."`
	Actual   populate.Mix    `json:"actual" doc:"Over all clusters' work done and queued."`
}

// phaseKind maps a plain loop's phase to the kind of work it does.
func phaseKind(phase string) string {
	switch phase {
	case "selfplay", "export":
		return populate.Selfplay
	case "train":
		return populate.Training
	case "gauntlet":
		return populate.Tournament
	}
	return ""
}

// PopulatorOf says how a cluster's queue populator stands: its workflow's
// status and the mix it keeps (ok false: the cluster has none).
type PopulatorOf func(cluster string) (status string, mix populate.Mix, ok bool)

// QueueMix is the running loops' work by kind (self-play, training,
// tournament) and config, per cluster and over all, with the actual mix
// against each cluster's target: its populator's, else the seed's.
func QueueMix(loops []OpsLoop, populator PopulatorOf) QueueStatus {
	q := QueueStatus{Clusters: []ClusterQueue{}, Queued: populate.Counts{}, Running: populate.Counts{}, Target: populate.DefaultMix}
	byCluster := map[string]*ClusterQueue{}
	all := populate.Counts{}
	for _, l := range loops {
		if !l.Running {
			continue
		}
		c := byCluster[l.Cluster]
		if c == nil {
			c = &ClusterQueue{Cluster: l.Cluster, Configs: []ConfigQueue{}, Queued: populate.Counts{}, Running: populate.Counts{}, Done: populate.Counts{}, Target: populate.DefaultMix}
			if status, mix, ok := populator(l.Cluster); ok {
				c.Populator, c.Target = status, mix
			}
			byCluster[l.Cluster] = c
		}
		st := l.State
		cq := ConfigQueue{Config: l.Config, Loop: l.ID, Populated: st.Queued, Queued: populate.Counts{}, Done: populate.Counts{}}
		if st.Queued {
			for _, w := range st.Queue {
				cq.Queued[w.Kind]++
			}
			if st.Current != nil {
				cq.Running = st.Current.Kind
			}
			for k, n := range st.WorkDone {
				cq.Done[k] = n
			}
		} else {
			cq.Running = phaseKind(st.Phase)
			for _, g := range st.Generations {
				cq.Done[populate.Selfplay]++
				if g.Model != "" {
					cq.Done[populate.Training]++
				}
				if len(g.Gauntlet) > 0 {
					cq.Done[populate.Tournament]++
				}
			}
		}
		mixed := populate.Counts{}
		for _, k := range populate.Kinds {
			mixed[k] = cq.Done[k] + cq.Queued[k]
			c.Queued[k] += cq.Queued[k]
			c.Done[k] += cq.Done[k]
			q.Queued[k] += cq.Queued[k]
			all[k] += mixed[k]
		}
		if cq.Running != "" {
			mixed[cq.Running]++
			c.Running[cq.Running]++
			q.Running[cq.Running]++
			all[cq.Running]++
		}
		cq.Actual = mixed.Share()
		c.Configs = append(c.Configs, cq)
	}
	for _, name := range slices.Sorted(maps.Keys(byCluster)) {
		c := byCluster[name]
		tot := populate.Counts{}
		for _, k := range populate.Kinds {
			tot[k] = c.Done[k] + c.Queued[k] + c.Running[k]
		}
		c.Actual, c.Depth = tot.Share(), c.Queued.Total()+c.Running.Total()
		sort.Slice(c.Configs, func(i, j int) bool { return c.Configs[i].Config < c.Configs[j].Config })
		q.Clusters = append(q.Clusters, *c)
	}
	q.Actual = all.Share()
	return q
}
