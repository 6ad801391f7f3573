package ppo

// Action masks (envs.Spec.ActionMask): the last N values of a raw
// observation mark the legal actions. A masked logit becomes maskedLogit,
// so its probability is 0 in sampling, in the update's log-probabilities
// and entropy (its gradient is 0) and in the greedy policy: the policy
// never picks an action the env would refuse, and spends no probability
// learning not to. A finite value, not -Inf: p·log p stays 0, not NaN.
const maskedLogit = -1e30

// maskLogits masks z (one observation's logits) by mask (its last N raw
// values) and records the mask in keep when keep is not nil.
func maskLogits(z []float64, mask []float32, keep []bool) {
	for j, m := range mask {
		legal := m != 0
		if !legal {
			z[j] = maskedLogit
		}
		if keep != nil {
			keep[j] = legal
		}
	}
}

// applyKept masks z by a mask maskLogits recorded.
func applyKept(z []float64, keep []bool) {
	for j, legal := range keep {
		if !legal {
			z[j] = maskedLogit
		}
	}
}

// rowMask is the raw observation row i's mask, nil without masks.
func (l *Learner) rowMask(obs []float32, i int) []float32 {
	if !l.masked {
		return nil
	}
	return obs[(i+1)*l.od-l.nAct : (i+1)*l.od]
}
