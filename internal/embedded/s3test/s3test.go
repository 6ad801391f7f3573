// Package s3test gives a test package's TestMain a real S3 server: the
// embedded gateway (it runs once per process) on loopback, with its data
// in a temporary directory and one bucket opened on it.
package s3test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/embedded"
	"github.com/trainyard/trainyard/internal/objstore"
)

// Main starts the server, opens bucket on it, hands it to ready with the
// temporary directory (on the same disk as the server's data), runs the
// tests and cleans up; it returns m.Run's exit code, or 1 when the server
// did not start. The gateway changes the process's working directory, so
// anything built from relative paths must be built before Main.
//
//	func TestMain(m *testing.M) {
//		os.Exit(s3test.Main(m, "weights", func(s *objstore.Store, _ string) { bucket = s }))
//	}
func Main(m *testing.M, bucket string, ready func(store *objstore.Store, dir string)) int {
	code, err := run(m, bucket, ready)
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3test:", err)
		return 1
	}
	return code
}

func run(m *testing.M, bucket string, ready func(*objstore.Store, string)) (int, error) {
	dir, err := os.MkdirTemp("", "s3test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	creds, err := embedded.LoadOrCreateS3Credentials(filepath.Join(dir, "creds.json"))
	if err != nil {
		return 0, err
	}
	srv, err := embedded.StartS3("127.0.0.1", 0, filepath.Join(dir, "data"), creds)
	if err != nil {
		return 0, err
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := objstore.Open(ctx, objstore.Config{Endpoint: srv.Endpoint, Bucket: bucket, Insecure: true,
		AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey})
	if err != nil {
		return 0, fmt.Errorf("open bucket %s: %w", bucket, err)
	}
	ready(store, dir)
	return m.Run(), nil
}
