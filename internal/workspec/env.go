package workspec

import (
	"fmt"
	"strconv"
)

// Env variable names of the seed-000 knobs.
const (
	EnvWorkers       = "RAY_WORKERS"
	EnvEnvsPerWorker = "ENVS_PER_WORKER"
	EnvEpisodeLength = "EPISODE_LENGTH"
	EnvBatchSize     = "BATCH_SIZE"
)

// ApplyEnv overrides the rollout knobs from the environment the way the
// seed's scripts do: a set variable wins over the spec. lookup is
// os.LookupEnv in production and a map in tests. A malformed value is an
// error naming the variable, never silently ignored.
func (s *Spec) ApplyEnv(lookup func(string) (string, bool)) error {
	knobs := []struct {
		name string
		dst  *int
	}{
		{EnvWorkers, &s.Rollout.Workers},
		{EnvEnvsPerWorker, &s.Rollout.EnvsPerWorker},
		{EnvEpisodeLength, &s.Rollout.EpisodeLength},
		{EnvBatchSize, &s.Rollout.BatchSize},
	}
	for _, k := range knobs {
		v, ok := lookup(k.name)
		if !ok || v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("env %s=%q: must be a positive integer", k.name, v)
		}
		*k.dst = n
	}
	for i := range s.Roles {
		if s.Roles[i].Name == RoleRolloutWorker && s.Rollout.Workers > 0 {
			s.Roles[i].Count = s.Rollout.Workers
		}
	}
	return nil
}

// Env is the knobs as environment variables, for the processes of the work
// (the inverse of ApplyEnv).
func (s *Spec) Env() map[string]string {
	out := map[string]string{}
	for k, v := range s.Environment {
		out[k] = v
	}
	r := s.Rollout
	for name, v := range map[string]int{EnvWorkers: r.Workers, EnvEnvsPerWorker: r.EnvsPerWorker, EnvEpisodeLength: r.EpisodeLength, EnvBatchSize: r.BatchSize} {
		if v > 0 {
			out[name] = strconv.Itoa(v)
		}
	}
	return out
}
