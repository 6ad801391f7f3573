package native

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/pendulum"
)

// FuzzRestoreSnapshot feeds arbitrary bodies behind a valid CRC (so the
// parser is exercised): RestoreSnapshot must reject or accept without
// panicking, and an accepted state must step and snapshot again.
func FuzzRestoreSnapshot(f *testing.F) {
	for _, name := range Names() {
		v, _ := New(name, 2)
		od := v.Spec().Observation.Dim()
		_ = v.Reset(3, make([]float32, 2*od))
		s, err := v.(Snapshotter).Snapshot()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(name == pendulum.Name, s[:len(s)-4])
	}
	f.Fuzz(func(t *testing.T, pend bool, body []byte) {
		name := cartpole.Name
		if pend {
			name = pendulum.Name
		}
		v, _ := New(name, 2)
		snap := binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.ChecksumIEEE(body))
		if err := v.(Snapshotter).RestoreSnapshot(snap); err != nil {
			return
		}
		od, ad := v.Spec().Observation.Dim(), v.Spec().Action.Dim()
		if err := v.Step(make([]float32, 2*ad), make([]float32, 2*od), make([]float32, 2), make([]bool, 2), make([]bool, 2), make([]float32, 2*od)); err != nil {
			t.Fatalf("step after restore: %v", err)
		}
		if _, err := v.(Snapshotter).Snapshot(); err != nil {
			t.Fatalf("snapshot after restore: %v", err)
		}
	})
}
