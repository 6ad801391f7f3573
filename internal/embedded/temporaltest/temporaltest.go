// Package temporaltest gives a test a real Temporal server: the embedded
// one on loopback (SQLite in the test's temporary directory, namespace
// "default"), dialled the way every trainyard process dials it.
package temporaltest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/trainyard/trainyard/internal/embedded"
	"github.com/trainyard/trainyard/internal/temporalx"
)

// Start starts the server with attrs registered as search attributes and
// returns a client (with the tracing interceptor temporalx.Dial adds);
// both are stopped when the test ends.
func Start(t testing.TB, attrs map[string]enumspb.IndexedValueType) client.Client {
	t.Helper()
	srv, err := embedded.StartTemporal(embedded.TemporalOptions{
		DatabaseFile: filepath.Join(t.TempDir(), "temporal.db"), Namespaces: []string{"default"},
		SearchAttributes: attrs, DynamicConfig: embedded.DefaultDynamicConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := temporalx.Dial(ctx, temporalx.Options{Address: srv.Address, Namespace: "default",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
