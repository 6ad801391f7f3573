// Package logstream keeps a process's stdout and stderr in S3 while it runs:
// a Writer on the node cuts the output into chunks (every second, or every
// 64 KiB, whichever comes first) and uploads each as a whole object, so a
// half-written chunk is never visible and a node that dies loses at most
// the last second; a Reader on the control plane concatenates the chunks
// and follows new ones.
//
// A log is every chunk under one prefix:
//
//	logs/jobs/<job-id>/<instance>/<offset, 16 digits>-<writer>.log
//	logs/runs/<run-id>/<offset, 16 digits>-<writer>.log
//
// offset is the position of the chunk's first byte in the log. A process
// started again (the job or run placed on another node) continues at the
// end of what its predecessors wrote, so positions never move: a reader
// asks for bytes from a position, and rotation (the oldest chunks deleted
// once the log exceeds its cap) leaves a gap the reader reports instead of
// shifting what follows. writer names the process that wrote the chunk
// (its activity), so two writers never overwrite each other's chunks.
package logstream

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Prefix is where every log lives.
const Prefix = "logs/"

// JobPrefix is the log of one instance of a job (0 for a single-process
// job; a gang's instances in placement order, as `job show` lists them).
func JobPrefix(jobID string, instance int) string {
	return fmt.Sprintf("%sjobs/%s/%d/", Prefix, jobID, instance)
}

// RunPrefix is the log of a bring-your-own trainer's process (rank 0's,
// in a multi-node gang).
func RunPrefix(runID string) string {
	return Prefix + "runs/" + runID + "/"
}

// RankPrefix is the log of rank of a multi-node gang's trainer: rank 0's
// is RunPrefix, the others' below it (a listing of RunPrefix does not
// descend into them).
func RankPrefix(runID string, rank int) string {
	if rank == 0 {
		return RunPrefix(runID)
	}
	return fmt.Sprintf("%srank-%d/", RunPrefix(runID), rank)
}

// chunkKey names a chunk starting at offset, written by writer.
func chunkKey(prefix string, offset int64, writer string) string {
	return fmt.Sprintf("%s%016d-%s.log", prefix, offset, writer)
}

// parseChunk reads a chunk's offset from its key; ok is false for any
// other object under the prefix.
func parseChunk(key string) (offset int64, ok bool) {
	base := path.Base(key)
	if !strings.HasSuffix(base, ".log") || len(base) < 17 || base[16] != '-' {
		return 0, false
	}
	off, err := strconv.ParseInt(base[:16], 10, 64)
	return off, err == nil && off >= 0
}

// Chunk is one stored piece of a log.
type Chunk struct {
	Key    string
	Offset int64
	Size   int64
}

// End is the position just past the chunk.
func (c Chunk) End() int64 { return c.Offset + c.Size }
