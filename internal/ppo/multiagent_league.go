package ppo

import "github.com/trainyard/trainyard/internal/learner"

// A league agent (learner.MultiAgent.League) plays each episode against one
// of its frozen member policies, drawn at the episode's start
// (Resolved.Drawn: a hash of the seed, the instance and the episode count,
// so a restore or a rollout worker needs no random state). Its seat acts
// for the agent's slot of every instance with the member drawn there: a
// script's act, a network's greedy action. A member plays only in the
// league, so its episodes and actions are the seat's, kept in the member's
// scriptReturns like a script's.

// seat is one league agent's slots.
type seat struct {
	agent   int
	slots   []int     // the agent's slot of each instance
	cur     []int     // the policy each slot plays now
	episode []int64   // episodes begun in each slot
	epRet   []float64 // each slot's unfinished return
	idx     []int     // scratch: the slots one member acts for
	obs     []float32
	acts    []float32
}

// seatState is a seat in a checkpoint.
type seatState struct {
	Cur     []int     `json:"current"`
	Episode []int64   `json:"episodes"`
	EpRet   []float64 `json:"episode_return"`
}

// newSeats makes a seat per league agent of res, each slot's first
// opponent drawn.
func newSeats(res learner.Resolved, na, slots, od, ad int, seed uint64) []*seat {
	var out []*seat
	for a, members := range res.League {
		if members == nil {
			continue
		}
		s := &seat{agent: a}
		for k := a; k < slots; k += na {
			s.slots = append(s.slots, k)
			s.cur = append(s.cur, res.Drawn(seed, a, k/na, 0))
		}
		n := len(s.slots)
		s.episode, s.epRet = make([]int64, n), make([]float64, n)
		s.obs, s.acts = make([]float32, n*od), make([]float32, n*ad)
		out = append(out, s)
	}
	return out
}

// actSeats writes every seat's actions into m.actions, each member acting
// for the slots that play it (pick: the member of seat slot j; nil for
// each slot's current one).
func (m *multi) actSeats(obs, actions []float32, seats []*seat, pick func(s *seat, j int) int) {
	od, ad := m.od, m.ad
	for _, s := range seats {
		for i, p := range m.pols {
			s.idx = s.idx[:0]
			for j, k := range s.slots {
				if who := s.memberOf(j, pick); who == i {
					s.idx = append(s.idx, k)
				}
			}
			n := len(s.idx)
			if n == 0 {
				continue
			}
			o, a := s.obs[:n*od], s.acts[:n*ad]
			for j, k := range s.idx {
				copy(o[j*od:(j+1)*od], obs[k*od:(k+1)*od])
			}
			if p.l != nil {
				_ = p.l.Act(o, a) // sizes match by construction
			} else {
				p.act(o, a, n)
			}
			for j, k := range s.idx {
				copy(actions[k*ad:(k+1)*ad], a[j*ad:(j+1)*ad])
				if p.count != nil && pick == nil {
					p.count[int(a[j])]++
				}
			}
		}
	}
}

func (s *seat) memberOf(j int, pick func(*seat, int) int) int {
	if pick != nil {
		return pick(s, j)
	}
	return s.cur[j]
}

// recordSeats credits each finished league episode to the member that
// played it and draws the slot's next opponent.
func (m *multi) recordSeats() {
	for _, s := range m.seats {
		for j, k := range s.slots {
			s.epRet[j] += float64(m.rewards[k])
			if !m.term[k] && !m.trunc[k] {
				continue
			}
			p := m.pols[s.cur[j]]
			p.stats.ended = append(p.stats.ended, s.epRet[j])
			p.stats.take(s.epRet[j], &p.m)
			s.epRet[j] = 0
			s.episode[j]++
			s.cur[j] = m.res.Drawn(m.seed, s.agent, k/m.na, s.episode[j])
		}
	}
}

func (m *multi) seatStates() []seatState {
	var out []seatState
	for _, s := range m.seats {
		out = append(out, seatState{Cur: s.cur, Episode: s.episode, EpRet: s.epRet})
	}
	return out
}

// restoreSeats puts checkpointed seats back; false when they do not fit.
func (m *multi) restoreSeats(st []seatState) bool {
	if len(st) != len(m.seats) {
		return false
	}
	for i, s := range m.seats {
		x := st[i]
		if len(x.Cur) != len(s.cur) || len(x.Episode) != len(s.episode) || len(x.EpRet) != len(s.epRet) {
			return false
		}
		for _, c := range x.Cur {
			if c < 0 || c >= len(m.pols) || !m.res.Member[c] {
				return false
			}
		}
		copy(s.cur, x.Cur)
		copy(s.episode, x.Episode)
		copy(s.epRet, x.EpRet)
	}
	return true
}

// bookkept reports whether p's episodes are counted in its scriptReturns
// (a script, a league member) rather than by a Learner's own rollout.
func (p *maPolicy) bookkept() bool { return p.l == nil || p.league }
