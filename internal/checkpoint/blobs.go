package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/objstore"
)

// blobs is the little a Store needs of object storage: an S3 bucket, or a
// local directory holding the same keys as files (NewDir).
type blobs interface {
	// get returns an object's bytes; errNoSuchKey when there is none.
	get(ctx context.Context, key string) ([]byte, error)
	put(ctx context.Context, key string, b []byte, contentType string) error
	// getTagged is get plus the object's entity tag, for putIf.
	getTagged(ctx context.Context, key string) ([]byte, string, error)
	// putIf writes only if the object is unchanged: match is the entity
	// tag getTagged returned, or "" for "only if there is none". Another
	// writer's change is errPrecondition.
	putIf(ctx context.Context, key string, b []byte, contentType, match string) error
	// size is an object's size; errNoSuchKey when there is none.
	size(ctx context.Context, key string) (int64, error)
	remove(ctx context.Context, key string) error
	// list yields every object under prefix, recursively.
	list(ctx context.Context, prefix string) iter.Seq2[object, error]
}

type object struct {
	Key          string
	Size         int64
	LastModified time.Time
}

var (
	errNoSuchKey    = errors.New("no such key")
	errPrecondition = errors.New("object changed by another writer")
)

// s3Bucket is a bucket on an S3 endpoint.
type s3Bucket struct{ s *objstore.Store }

func (b s3Bucket) get(ctx context.Context, key string) ([]byte, error) {
	obj, err := b.s.Client.GetObject(ctx, b.s.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if isNoSuchKey(err) {
		return nil, errNoSuchKey
	}
	return data, err
}

func (b s3Bucket) put(ctx context.Context, key string, data []byte, contentType string) error {
	_, err := b.s.Client.PutObject(ctx, b.s.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{ContentType: contentType})
	return err
}

func (b s3Bucket) getTagged(ctx context.Context, key string) ([]byte, string, error) {
	obj, err := b.s.Client.GetObject(ctx, b.s.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, "", err
	}
	defer obj.Close()
	// Read first: the one GET then gives both the bytes and their tag.
	// Stat first would HEAD, then GET with If-Match, which fails when
	// another writer replaced the object in between.
	data, err := io.ReadAll(obj)
	if isNoSuchKey(err) {
		return nil, "", errNoSuchKey
	}
	if err != nil {
		return nil, "", err
	}
	info, err := obj.Stat()
	return data, info.ETag, err
}

// putIf uses S3's conditional writes (If-Match, If-None-Match: *), which
// AWS, MinIO, R2 and the embedded gateway (versitygw) all honour.
func (b s3Bucket) putIf(ctx context.Context, key string, data []byte, contentType, match string) error {
	opts := minio.PutObjectOptions{ContentType: contentType}
	if match == "" {
		opts.SetMatchETagExcept("*")
	} else {
		opts.SetMatchETag(match)
	}
	_, err := b.s.Client.PutObject(ctx, b.s.Bucket, key, bytes.NewReader(data), int64(len(data)), opts)
	switch r := minio.ToErrorResponse(err); {
	case err == nil:
		return nil
	case r.StatusCode == http.StatusPreconditionFailed, r.StatusCode == http.StatusConflict,
		r.Code == "PreconditionFailed", r.Code == "ConditionalRequestConflict":
		return fmt.Errorf("put %s: %w", key, errPrecondition)
	}
	return err
}

func (b s3Bucket) size(ctx context.Context, key string) (int64, error) {
	info, err := b.s.Client.StatObject(ctx, b.s.Bucket, key, minio.StatObjectOptions{})
	if isNoSuchKey(err) {
		return 0, errNoSuchKey
	}
	return info.Size, err
}

func (b s3Bucket) remove(ctx context.Context, key string) error {
	return b.s.Client.RemoveObject(ctx, b.s.Bucket, key, minio.RemoveObjectOptions{})
}

func (b s3Bucket) list(ctx context.Context, prefix string) iter.Seq2[object, error] {
	return func(yield func(object, error) bool) {
		for o := range b.s.Client.ListObjects(ctx, b.s.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if !yield(object{Key: o.Key, Size: o.Size, LastModified: o.LastModified}, o.Err) || o.Err != nil {
				return
			}
		}
	}
}

// NewDir keeps checkpoints in a local directory instead of a bucket: every
// object key is a file path under dir (dir/checkpoints/runs/<run>/<seq>/
// manifest.json, dir/checkpoints/chunks/<sha256>), so the layout, the
// manifests and the chunks are those of S3 and a directory can be copied
// into a bucket as is. Files are written beside their name and renamed, so
// a manifest is never seen half-written.
func NewDir(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint dir %s: %w", dir, err)
	}
	return over(dirBucket(dir), opts), nil
}

type dirBucket string

func (d dirBucket) path(key string) string { return filepath.Join(string(d), filepath.FromSlash(key)) }

func (d dirBucket) get(_ context.Context, key string) ([]byte, error) {
	b, err := os.ReadFile(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoSuchKey
	}
	return b, err
}

func (d dirBucket) put(_ context.Context, key string, b []byte, _ string) error {
	p := d.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func (d dirBucket) getTagged(ctx context.Context, key string) ([]byte, string, error) {
	b, err := d.get(ctx, key)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

// dirPutIf serialises a directory's conditional writes: a directory store
// has one process writing it (a local run), so a lock in that process is
// enough to make check-and-write one step.
var dirPutIf sync.Mutex

func (d dirBucket) putIf(ctx context.Context, key string, b []byte, contentType, match string) error {
	dirPutIf.Lock()
	defer dirPutIf.Unlock()
	_, tag, err := d.getTagged(ctx, key)
	switch {
	case errors.Is(err, errNoSuchKey):
		tag = ""
	case err != nil:
		return err
	}
	if tag != match {
		return fmt.Errorf("put %s: %w", key, errPrecondition)
	}
	return d.put(ctx, key, b, contentType)
}

func (d dirBucket) size(_ context.Context, key string) (int64, error) {
	info, err := os.Stat(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, errNoSuchKey
	}
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

func (d dirBucket) remove(_ context.Context, key string) error {
	if err := os.Remove(d.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (d dirBucket) list(_ context.Context, prefix string) iter.Seq2[object, error] {
	return func(yield func(object, error) bool) {
		// Walk the deepest directory the prefix names; keys are filtered by
		// the whole prefix.
		root := string(d)
		if i := strings.LastIndex(prefix, "/"); i >= 0 {
			root = d.path(prefix[:i])
		}
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
				return nil // temp files of a put in flight
			}
			rel, err := filepath.Rel(string(d), p)
			if err != nil {
				return err
			}
			key := filepath.ToSlash(rel)
			if !strings.HasPrefix(key, prefix) {
				return nil
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			if !yield(object{Key: key, Size: info.Size(), LastModified: info.ModTime()}, nil) {
				return fs.SkipAll
			}
			return nil
		})
		if err != nil {
			yield(object{}, err)
		}
	}
}
