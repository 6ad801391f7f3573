package dqn

// replay is the ring of the last cap transitions. It grows as it fills,
// so a restore allocates only what the checkpoint holds.
type replay struct {
	cap, od   int
	obs, next []float32 // n × od: the observation and the one after
	act       []int32
	rew       []float32
	// term marks a transition into a terminal state (no bootstrap); a
	// truncated episode's next is its final observation and bootstraps.
	term []bool
	// pos is the slot the next transition overwrites once full.
	pos int
}

func newReplay(capacity, od int) replay { return replay{cap: capacity, od: od} }

func (b *replay) len() int { return len(b.rew) }

func (b *replay) add(obs, next []float32, act int32, rew float32, term bool) {
	if len(b.rew) < b.cap {
		b.obs = append(b.obs, obs...)
		b.next = append(b.next, next...)
		b.act = append(b.act, act)
		b.rew = append(b.rew, rew)
		b.term = append(b.term, term)
		return
	}
	i, od := b.pos, b.od
	copy(b.obs[i*od:(i+1)*od], obs)
	copy(b.next[i*od:(i+1)*od], next)
	b.act[i], b.rew[i], b.term[i] = act, rew, term
	b.pos = (b.pos + 1) % b.cap
}
