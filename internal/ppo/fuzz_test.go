package ppo

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
)

// FuzzRestore feeds Restore arbitrary bodies behind a valid checksum (so the
// parser, not the hash, is exercised): it must return an error or a usable
// learner, never panic or allocate without bound.
func FuzzRestore(f *testing.F) {
	l, err := New(newEnv(f, cartpole.Name, 2), smallConfig(cartpole.Name, 1))
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := l.Save(&buf); err != nil {
		f.Fatal(err)
	}
	good := buf.Bytes()
	f.Add(good[:len(good)-sha256.Size])
	f.Add([]byte(ckptMagic + "\x01\x00\x00\x00\x02\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := sha256.Sum256(body)
		data := append(bytes.Clone(body), sum[:]...)
		r, err := Restore(bytes.NewReader(data), newEnv(t, cartpole.Name, 2))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := r.Save(&out); err != nil {
			t.Fatalf("restored learner cannot save: %v", err)
		}
	})
}
