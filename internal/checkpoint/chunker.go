package checkpoint

import "math/bits"

// Content-defined chunking: FastCDC (Xia et al., USENIX ATC 2016) with a
// gear rolling hash and normalised chunking. A boundary is placed where the
// hash of the last 64 bytes has its top bits clear, so it depends on the
// content around it and not on the offset: an insertion, deletion or
// rewrite moves or changes only the boundaries within ~64 bytes of it, and
// every chunk after the next unchanged boundary is the same as before.
//
// The gear table and the mask rule decide every boundary ever written;
// changing either re-chunks all data (correct, but nothing written before
// deduplicates any more), so both are fixed here for good.

// gear maps a byte to a pseudo-random 64-bit value: splitmix64 from a fixed
// seed, computed rather than pasted so the table is reviewable.
var gear = func() (t [256]uint64) {
	x := uint64(0x7472_6169_6e79_6172) // "trainyar"
	for i := range t {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		t[i] = z ^ (z >> 31)
	}
	return t
}()

// chunker holds the size bounds derived from Options.ChunkSize.
type chunker struct {
	min, avg, max int
	// Normalised chunking: before avg bytes a boundary needs two more zero
	// bits (1/4 as likely), after it two fewer (4× as likely), which pulls
	// chunk sizes towards avg and makes very small and very large chunks rare.
	maskS, maskL uint64
}

// newChunker targets an average chunk of avg bytes (rounded down to a power
// of two), never smaller than avg/4 (except a file's last chunk) nor larger
// than 4·avg.
func newChunker(avg int64) chunker {
	b := max(bits.Len64(uint64(avg))-1, 8) // log2, at least 256 B
	a := 1 << b
	top := func(n int) uint64 { return ^uint64(0) << (64 - n) }
	return chunker{min: a / 4, avg: a, max: 4 * a, maskS: top(b + 2), maskL: top(b - 2)}
}

// cut returns the length of the first chunk of b. b holds at least c.max
// bytes unless it is the rest of the file, in which case all of it may be
// one chunk.
func (c chunker) cut(b []byte) int {
	n := len(b)
	if n <= c.min {
		return n
	}
	n = min(n, c.max)
	normal := min(c.avg, n)
	// The hash starts at min: bytes before it cannot end a chunk, so
	// hashing them would only cost time. 64 bytes after min the hash
	// depends on nothing but the last 64 bytes (each step shifts by one).
	var h uint64
	i := c.min
	for ; i < normal; i++ {
		h = h<<1 + gear[b[i]]
		if h&c.maskS == 0 {
			return i + 1
		}
	}
	for ; i < n; i++ {
		h = h<<1 + gear[b[i]]
		if h&c.maskL == 0 {
			return i + 1
		}
	}
	return n
}
