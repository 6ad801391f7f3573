// Package checkpoint stores training checkpoints in an S3 bucket as
// content-addressed chunks plus one manifest per checkpoint.
//
// # Object layout
//
// Everything lives under a prefix (Options.Prefix, default "checkpoints"):
//
//	checkpoints/chunks/<sha256 hex>                 one chunk: raw bytes of a file slice
//	checkpoints/runs/<run>/<seq>/manifest.json      one checkpoint: JSON Manifest
//	checkpoints/runs/<run>/fence.json               the placement that may write the run (fence.go)
//
// <seq> is a zero-padded decimal (0000000001, 0000000002, ...) so a plain
// lexical listing is chronological. A plain S3 client restores a checkpoint
// by hand: download manifest.json, then for every entry of "files" fetch its
// "chunks" in order from checkpoints/chunks/<sha256> and concatenate them;
// the result's sha256 is the file's "sha256". Chunks differ in size (each
// entry has its "size"); the manifest's "chunk_size" is the average the
// writer aimed at, for information only. For example with awscli:
//
//	aws s3 ls --recursive s3://bucket/checkpoints/runs/myrun/
//	aws s3 cp s3://bucket/checkpoints/runs/myrun/0000000003/manifest.json -
//
// # Why it is shaped this way
//
// Chunks are named by their sha256, so a chunk shared by two checkpoints
// (or two runs) is stored once: before uploading, Save asks the bucket
// whether the chunk exists (HEAD) and skips it if so. Between successive
// checkpoints of a model most of the bytes often repeat (frozen layers,
// optimiser state of unchanged parameters, datasets), and those cost one
// HEAD each.
//
// Files are cut into content-defined chunks (FastCDC: a gear rolling hash
// over the last 64 bytes, with normalised chunking; see chunker.go) of
// about Options.ChunkSize bytes (default 64 KiB, each between 1/4 and 4
// times that). A boundary depends only on the bytes around it, not on its
// offset, so an edit changes only the chunks it touches: a tensor rewritten
// in place costs its own bytes plus about one or two chunks, and bytes
// inserted or deleted (a header that grew) shift later data without
// changing later chunks, where fixed-size chunks would all change. Smaller
// chunks waste less around each edit but cost one object, one HEAD and one
// PUT each; 64 KiB sends about 100 KiB beyond the changed bytes per edit
// (BenchmarkSecondCheckpoint: 89% of a 64 MiB checkpoint with 10% new bytes
// in six places not sent, 90% being the most possible).
//
// Chunks upload in parallel through a bounded worker pool, which also
// bounds the memory Save holds (Parallel+1 chunks and a read buffer of four
// maximum chunks).
//
// The manifest is written last, after every chunk is in the bucket, and
// List reads only manifests: a checkpoint whose writer died half-way is
// never visible, only its orphan chunks remain (reused by the next Save).
//
// Restore verifies the sha256 of every chunk as it arrives and of every
// whole file once written, writes each file beside its destination and
// renames it into place only when it verified; corruption is reported as
// ErrChecksum naming run, checkpoint, file and chunk, a missing chunk as
// ErrMissingChunk.
//
// # Retention
//
// Prune deletes manifests only, keeping the last K and the best by a metric.
// Chunks are shared between checkpoints and runs and a concurrent Save may
// be about to reference a chunk it found present, so Prune never deletes
// chunks; CollectGarbage deletes chunks that no manifest of any run
// references and that are older than a grace period, and must not run
// concurrently with a Save (a Save may skip an old chunk it found present).
//
// Two writers of one run never share a sequence number (manifests are
// written with If-None-Match); which of them is the run's is the fence's
// decision (fence.go).
package checkpoint

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// ErrChecksum means downloaded bytes do not match the manifest's sha256.
var ErrChecksum = errors.New("checksum mismatch")

// ErrMissingChunk means a manifest references a chunk the bucket lacks.
var ErrMissingChunk = errors.New("chunk missing from bucket")

// ErrNotFound means no such checkpoint (or no checkpoint at all for a run).
var ErrNotFound = errors.New("checkpoint not found")

// ManifestVersion is the format version written into new manifests.
const ManifestVersion = 1

// Meta describes a checkpoint for people and for retention.
type Meta struct {
	Iteration int64              `json:"iteration,omitempty"`
	Metrics   map[string]float64 `json:"metrics,omitempty"` // e.g. "mean_return": 480.2
	Labels    map[string]string  `json:"labels,omitempty"`
	// Epoch is the placement that wrote it (fence.go); 0: unfenced.
	Epoch int64 `json:"epoch,omitempty"`
}

// Manifest is the JSON document stored at runs/<run>/<seq>/manifest.json.
type Manifest struct {
	Version   int       `json:"version"`
	Run       string    `json:"run"`
	Seq       int64     `json:"seq"`
	Created   time.Time `json:"created"`
	ChunkSize int64     `json:"chunk_size"`
	Meta      Meta      `json:"meta"`
	Files     []File    `json:"files"` // sorted by Path
}

// File is one file of a checkpoint.
type File struct {
	Path   string  `json:"path"` // slash-separated, relative
	Size   int64   `json:"size"`
	Mode   uint32  `json:"mode,omitempty"` // permission bits; 0 means 0644
	SHA256 string  `json:"sha256"`
	Chunks []Chunk `json:"chunks"` // in file order; empty for an empty file
}

// Chunk is one slice of a file, stored at chunks/<SHA256>.
type Chunk struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Size is the sum of the checkpoint's file sizes.
func (m Manifest) Size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Stats counts what a Save did.
type Stats struct {
	BytesTotal     int64 // bytes in the checkpoint's files
	BytesUploaded  int64 // chunk bytes actually sent (new chunks)
	ChunksTotal    int   // chunks referenced by the manifest
	ChunksUploaded int   // chunks sent (the rest were already stored)
}

var runName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkRun(run string) error {
	if !runName.MatchString(run) {
		return fmt.Errorf("checkpoint run name %q: want 1-128 of [A-Za-z0-9._-], starting alphanumeric", run)
	}
	return nil
}
