package checkpoint

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

const benchSize = 64 << 20

// BenchmarkUpload saves a 64 MiB file into a fresh prefix each time (no
// chunk already stored) and copies the same file on the same disk as the
// embedded S3's data, reporting both rates and their ratio.
func BenchmarkUpload(b *testing.B) {
	ctx := b.Context()
	src := filepath.Join(filepath.Dir(s3DataDr), "bench-src.bin")
	if err := os.WriteFile(src, randBytes(11, benchSize), 0o644); err != nil {
		b.Fatal(err)
	}
	defer os.Remove(src)
	var s3Time, copyTime time.Duration
	b.SetBytes(benchSize)
	for b.Loop() {
		s := New(bucket, Options{Prefix: fmt.Sprintf("bench%d", prefixN.Add(1))})
		start := time.Now()
		f, err := os.Open(src)
		if err != nil {
			b.Fatal(err)
		}
		_, st, err := s.Save(ctx, "bench", map[string]io.Reader{"model.bin": f}, Meta{})
		f.Close()
		if err != nil || st.BytesUploaded != benchSize {
			b.Fatalf("save: %+v %v", st, err)
		}
		s3Time += time.Since(start)

		start = time.Now()
		if err := copyFile(src, src+".copy"); err != nil {
			b.Fatal(err)
		}
		copyTime += time.Since(start)
		os.Remove(src + ".copy")
	}
	mib := float64(b.N) * benchSize / (1 << 20)
	b.ReportMetric(mib/s3Time.Seconds(), "s3-MiB/s")
	b.ReportMetric(mib/copyTime.Seconds(), "copy-MiB/s")
	b.ReportMetric(copyTime.Seconds()/s3Time.Seconds(), "s3/copy")
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// BenchmarkSecondCheckpoint saves a 64 MiB model, then the same model with
// a contiguous 10% of its bytes rewritten (one layer updated in place), and
// reports the share of the second checkpoint's bytes that were not sent.
// The change is not chunk-aligned, so up to two partly changed chunks are
// sent whole: smaller chunks save more, at one HEAD request per chunk.
func BenchmarkSecondCheckpoint(b *testing.B) {
	for _, chunk := range []int64{1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("chunk=%dMiB", chunk>>20), func(b *testing.B) { benchSecond(b, chunk) })
	}
}

func benchSecond(b *testing.B, chunk int64) {
	ctx := b.Context()
	base := randBytes(12, benchSize)
	next := slices.Clone(base)
	copy(next[benchSize/3:], randBytes(13, benchSize/10))
	var saved float64
	b.SetBytes(benchSize)
	for b.Loop() {
		s := New(bucket, Options{Prefix: fmt.Sprintf("bench%d", prefixN.Add(1)), ChunkSize: chunk})
		b.StopTimer()
		if _, _, err := s.Save(ctx, "bench", map[string]io.Reader{"model.bin": bytes.NewReader(base)}, Meta{}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		_, st, err := s.Save(ctx, "bench", map[string]io.Reader{"model.bin": bytes.NewReader(next)}, Meta{})
		if err != nil {
			b.Fatal(err)
		}
		saved = 100 * (1 - float64(st.BytesUploaded)/float64(st.BytesTotal))
	}
	b.ReportMetric(saved, "saved-%")
}
