package healthcheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/objstore"
)

// Activities holds what the health-check activities touch.
type Activities struct {
	Store    *objstore.Store
	Identity string // of the worker, reported back to the caller
}

// StorageInput is the object to write.
type StorageInput struct {
	Key  string `json:"key"`
	Note string `json:"note"`
}

// StorageRoundTrip puts an object, reads it back, compares and deletes it.
func (a *Activities) StorageRoundTrip(ctx context.Context, in StorageInput) (Result, error) {
	start := time.Now()
	body := []byte(fmt.Sprintf("trainyard healthcheck: %s", in.Note))
	if _, err := a.Store.Client.PutObject(ctx, a.Store.Bucket, in.Key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{ContentType: "text/plain"}); err != nil {
		return Result{}, fmt.Errorf("healthcheck put %s: %w", in.Key, err)
	}
	obj, err := a.Store.Client.GetObject(ctx, a.Store.Bucket, in.Key, minio.GetObjectOptions{})
	if err != nil {
		return Result{}, fmt.Errorf("healthcheck get %s: %w", in.Key, err)
	}
	got, err := io.ReadAll(obj)
	obj.Close()
	if err != nil {
		return Result{}, fmt.Errorf("healthcheck read %s: %w", in.Key, err)
	}
	if !bytes.Equal(got, body) {
		return Result{}, fmt.Errorf("healthcheck %s: read back %d bytes that differ from the %d written", in.Key, len(got), len(body))
	}
	if err := a.Store.Client.RemoveObject(ctx, a.Store.Bucket, in.Key, minio.RemoveObjectOptions{}); err != nil {
		return Result{}, fmt.Errorf("healthcheck delete %s: %w", in.Key, err)
	}
	return Result{
		Note:        in.Note,
		Worker:      a.Identity,
		ObjectKey:   in.Key,
		ObjectBytes: len(body),
		S3Millis:    time.Since(start).Milliseconds(),
	}, nil
}
