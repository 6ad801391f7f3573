package pluginstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/trainyard/trainyard/internal/embedded"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/plugintest"
)

// TestSeedBuiltins: built-ins are registered once by sha256, a user's
// plugin of the same name@version is never replaced, and by name the
// user's is what resolves — against a real S3 gateway.
func TestSeedBuiltins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	shaping := plugintest.BuildGo(t, "./plugins/shaping")
	cartpole := plugintest.BuildGo(t, "./plugins/cartpole")
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	files, err := pluginstore.PackBuiltins(ctx, rt, map[string][]byte{"shaping": shaping, "cartpole": cartpole})
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	for name, b := range files {
		fsys[name] = &fstest.MapFile{Data: b}
	}
	set, err := pluginstore.Builtins(fsys)
	if err != nil || len(set) != 2 {
		t.Fatalf("index: %v %+v", err, set)
	}
	if empty, err := pluginstore.Builtins(fstest.MapFS{}); err != nil || empty != nil {
		t.Fatalf("no index: want an empty set, got %v %v", empty, err)
	}
	if b, ok := pluginstore.FindBuiltin(set, "CartPole-v1"); !ok {
		t.Fatal("CartPole-v1 not found by name")
	} else if wasm, err := b.Module(fsys); err != nil || pluginhost.SHA256(wasm) != pluginhost.SHA256(cartpole) {
		t.Fatalf("module: %v", err)
	}
	corrupt := fstest.MapFS{set[0].File: &fstest.MapFile{Data: files[set[1].File]}}
	if _, err := set[0].Module(corrupt); err == nil {
		t.Fatal("a module whose bytes do not hash to its id was read")
	}

	ps := pluginstore.New(s3Store(t, ctx))
	// The user's own CartPole-v1@same version, other bytes (a custom section).
	cpMeta := set[0].Metadata
	if cpMeta.Name != "CartPole-v1" {
		cpMeta = set[1].Metadata
	}
	mine := append(append([]byte{}, cartpole...), 0, 6, 4, 'm', 'i', 'n', 'e', 1)
	if _, err := rt.Validate(ctx, mine, pluginhost.Limits{}); err != nil {
		t.Fatalf("custom section broke the module: %v", err)
	}
	for _, tc := range []struct {
		name                 string
		before               func()
		added, present, kept int
	}{
		{name: "first start", added: 2},
		{name: "restart", present: 2},
		{name: "a user's plugin of the same name@version", kept: 1, present: 1, before: func() {
			rec, _ := ps.Resolve(ctx, "CartPole-v1")
			if err := ps.Delete(ctx, rec.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := ps.Put(ctx, mine, cpMeta, "alice"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			rep, err := ps.Seed(ctx, fsys, set)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Added) != tc.added || rep.Present != tc.present || len(rep.Kept) != tc.kept {
				t.Fatalf("seed: %+v, want added %d present %d kept %d", rep, tc.added, tc.present, tc.kept)
			}
		})
	}
	rec, err := ps.Resolve(ctx, "CartPole-v1")
	if err != nil || rec.UploadedBy != "alice" {
		t.Fatalf("by name: %+v %v, want alice's upload", rec, err)
	}
	// Stored beside it, a built-in of the same name no longer makes the
	// name ambiguous: the upload shadows it.
	if _, err := ps.Put(ctx, cartpole, cpMeta, pluginstore.BuiltinBy); err != nil {
		t.Fatal(err)
	}
	if rec, err := ps.Resolve(ctx, "CartPole-v1"); err != nil || rec.UploadedBy != "alice" {
		t.Fatalf("beside a built-in: %+v %v, want alice's upload", rec, err)
	}
}

func s3Store(t *testing.T, ctx context.Context) *objstore.Store {
	t.Helper()
	dir := t.TempDir()
	creds, err := embedded.LoadOrCreateS3Credentials(filepath.Join(dir, "creds.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := embedded.StartS3("127.0.0.1", 0, filepath.Join(dir, "s3"), creds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	store, err := objstore.Open(ctx, objstore.Config{Endpoint: srv.Endpoint, Bucket: "plugins-test", Insecure: true,
		AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey})
	if err != nil {
		t.Fatal(err)
	}
	return store
}
