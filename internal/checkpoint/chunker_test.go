package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"testing"
)

// cuts returns the chunk lengths the chunker gives b.
func cuts(c chunker, b []byte) []int {
	var out []int
	for len(b) > 0 {
		n := c.cut(b)
		out = append(out, n)
		b = b[n:]
	}
	return out
}

func TestChunkerBounds(t *testing.T) {
	c := newChunker(64 << 10)
	if c.min != 16<<10 || c.avg != 64<<10 || c.max != 256<<10 {
		t.Fatalf("chunker %+v", c)
	}
	if got := newChunker(100 << 10); got.avg != 64<<10 {
		t.Errorf("avg 100 KiB rounds to %d, want 64 KiB", got.avg)
	}
	data := randBytes(21, 16<<20)
	sizes := cuts(c, data)
	for i, n := range sizes {
		if n > c.max || (n < c.min && i != len(sizes)-1) {
			t.Fatalf("chunk %d has %d bytes, outside [%d,%d]", i, n, c.min, c.max)
		}
	}
	if mean := len(data) / len(sizes); mean < c.avg/2 || mean > 2*c.avg {
		t.Errorf("mean chunk %d bytes over %d chunks, want about %d", mean, len(sizes), c.avg)
	}
	// A run of one byte value never matches the mask: max-size chunks,
	// all the same, so zero padding deduplicates.
	if got := cuts(c, make([]byte, 5*c.max+1)); !slices.Equal(got, []int{c.max, c.max, c.max, c.max, c.max, 1}) {
		t.Errorf("zeros cut into %v", got)
	}
}

// TestChunkerGolden pins the boundaries: a change to the gear table or the
// mask rule would silently stop every new checkpoint from sharing chunks
// with the ones already stored.
func TestChunkerGolden(t *testing.T) {
	sizes := cuts(newChunker(64<<10), randBytes(22, 4<<20))
	h := sha256.Sum256(fmt.Append(nil, sizes))
	const want = "37bee38cbc0d9e87"
	if got := hex.EncodeToString(h[:8]); got != want {
		t.Errorf("boundaries changed: %d chunks, digest %s, want %s (sizes %v)", len(sizes), got, want, sizes)
	}
}

// TestInsertionReusesChunks is why chunks are content-defined: bytes
// inserted or deleted near the start of a file shift everything after them,
// and only the chunks around the edit are uploaded again.
func TestInsertionReusesChunks(t *testing.T) {
	ctx := t.Context()
	base := randBytes(23, 40*testChunk)
	tests := []struct {
		name string
		edit func([]byte) []byte
	}{
		{"insert 7 bytes", func(b []byte) []byte { return slices.Insert(b, 1000, []byte("grown!!")...) }},
		{"delete 3 KiB", func(b []byte) []byte { return slices.Delete(b, 5000, 5000+3<<10) }},
		{"insert 100 KiB in the middle", func(b []byte) []byte { return slices.Insert(b, len(b)/2, randBytes(24, 100<<10)...) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if _, _, err := s.Save(ctx, "r", map[string]io.Reader{"m": bytes.NewReader(base)}, Meta{}); err != nil {
				t.Fatal(err)
			}
			next := tc.edit(slices.Clone(base))
			m, st, err := s.Save(ctx, "r", map[string]io.Reader{"m": bytes.NewReader(next)}, Meta{})
			if err != nil {
				t.Fatal(err)
			}
			// New bytes plus a few average chunks around the edit (fixed-size
			// chunks would send everything after it).
			limit := int64(max(0, len(next)-len(base))) + 5*testChunk
			if st.BytesUploaded > limit {
				t.Errorf("uploaded %d of %d bytes, want ≤ %d", st.BytesUploaded, st.BytesTotal, limit)
			}
			dst := t.TempDir()
			if err := s.Restore(ctx, "r", m.Seq, dst); err != nil {
				t.Fatal(err)
			}
			checkDir(t, dst, map[string][]byte{"m": next})
		})
	}
}
