package logstream

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/objstore"
)

// Reader copies a log out of S3.
type Reader struct {
	Store  *objstore.Store
	Prefix string
	// Poll is how often a follow looks for new chunks (default 250 ms).
	Poll time.Duration
}

// Copy writes the log from position from to w, calling flush after each
// batch of chunks. With ended nil it copies what is there and returns;
// otherwise it follows new chunks until ended reports true (asked before
// each look, so the chunks written before the end are all copied) or ctx
// ends. A gap (chunks deleted by rotation, or from past the start) is one
// line in the output saying which bytes are missing. It returns the
// position after the last byte copied.
func (r Reader) Copy(ctx context.Context, w io.Writer, from int64, flush func(), ended func(context.Context) (bool, error)) (int64, error) {
	poll := r.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	pos, after := from, ""
	for {
		done := ended == nil
		if !done {
			var err error
			if done, err = ended(ctx); err != nil {
				return pos, err
			}
		}
		chunks, err := List(ctx, r.Store, r.Prefix, after)
		if err != nil {
			return pos, err
		}
		for _, c := range chunks {
			after = c.Key
			if c.End() <= pos {
				continue
			}
			b, err := r.get(ctx, c)
			if err == errGone {
				continue // rotated away since the listing: the next chunk shows the gap
			}
			if err != nil {
				return pos, err
			}
			if c.Offset > pos {
				if _, err := fmt.Fprintf(w, "[trainyard: bytes %d-%d of this log are gone: it keeps the newest chunks up to its size cap]\n", pos, c.Offset); err != nil {
					return pos, err
				}
				pos = c.Offset
			}
			if _, err := w.Write(b[pos-c.Offset:]); err != nil {
				return pos, err
			}
			pos = c.End()
		}
		if flush != nil && len(chunks) > 0 {
			flush()
		}
		if done {
			return pos, nil
		}
		select {
		case <-ctx.Done():
			return pos, ctx.Err()
		case <-time.After(poll):
		}
	}
}

func (r Reader) get(ctx context.Context, c Chunk) ([]byte, error) {
	o, err := r.Store.Client.GetObject(ctx, r.Store.Bucket, c.Key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("log %s: get %s: %w", r.Prefix, c.Key, err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return nil, errGone
	}
	if err != nil {
		return nil, fmt.Errorf("log %s: read %s: %w", r.Prefix, c.Key, err)
	}
	if int64(len(b)) != c.Size {
		return nil, fmt.Errorf("log %s: %s has %d bytes, listed with %d", r.Prefix, c.Key, len(b), c.Size)
	}
	return b, nil
}
