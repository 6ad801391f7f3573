package training

import (
	"fmt"

	"github.com/trainyard/trainyard/internal/learner"
)

// minEpisodesForTarget keeps a lucky first episode from ending a run.
const minEpisodesForTarget = 20

// Reached reports whether m meets the spec's target return: the mean of the
// recent episodes, over enough of them. Without a target nothing is reached.
func (s Spec) Reached(m learner.Metrics) bool {
	return s.TargetReturn != nil && m.RecentEpisodes >= minEpisodesForTarget && m.RecentReturnMean >= *s.TargetReturn
}

// Missed is the outcome of a run that spent its budget: empty when it had no
// target or reached it, else why it is not a success.
func (s Spec) Missed(last []learner.Metrics, best float64) string {
	if s.TargetReturn == nil || (len(last) > 0 && s.Reached(last[len(last)-1])) {
		return ""
	}
	return fmt.Sprintf("target not reached (best %.1f, target %.1f)", best, *s.TargetReturn)
}
