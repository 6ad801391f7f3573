package pluginhost

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/trainyard/trainyard/sdk/go/envs/native"
)

// Snapshot saves the shaped env: the state of the env under it (a
// native.Snapshotter, as VecEnv is through env_save/env_restore; nil when
// that env cannot save its state) followed by the observations the next
// reward_batch takes as obs, n × obs_dim little-endian float32s. The
// reward plugin itself is a pure function of its arguments and has no
// state. With it a run with a reward plugin resumes bit for bit too.
func (s *ShapedVecEnv) Snapshot() ([]byte, error) {
	inner, ok := s.VecEnv.(native.Snapshotter)
	if !ok {
		return nil, nil
	}
	st, err := inner.Snapshot()
	if err != nil || st == nil {
		return nil, err
	}
	b := make([]byte, 0, len(st)+4*len(s.prev))
	b = append(b, st...)
	for _, v := range s.prev {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b, nil
}

// RestoreSnapshot puts back a state from Snapshot.
func (s *ShapedVecEnv) RestoreSnapshot(b []byte) error {
	inner, ok := s.VecEnv.(native.Snapshotter)
	if !ok {
		return fmt.Errorf("plugin %s: shaped env: restore: the env under it cannot restore a state", s.reward.label)
	}
	k := 4 * len(s.prev)
	if len(b) < k {
		return fmt.Errorf("plugin %s: shaped env: restore: %d bytes, want more than %d", s.reward.label, len(b), k)
	}
	if err := inner.RestoreSnapshot(b[:len(b)-k]); err != nil {
		return err
	}
	for i, p := 0, b[len(b)-k:]; i < len(s.prev); i++ {
		s.prev[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return nil
}
