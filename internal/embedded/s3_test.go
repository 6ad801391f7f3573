package embedded

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// TestAgentAccount: the keys agents get read and write the bucket's
// objects, but cannot read the clusters' join tokens (secrets/), change
// the policy bundle or the plugins, or remove the bucket or its policy;
// they stay the same across GrantAgents calls.
func TestAgentAccount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	creds, err := LoadOrCreateS3Credentials(filepath.Join(dir, "creds.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := StartS3("127.0.0.1", 0, filepath.Join(dir, "s3"), creds)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	client := func(c S3Credentials) *minio.Client {
		m, err := minio.New(srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(c.AccessKeyID, c.SecretAccessKey, "")})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	root := client(creds)
	if err := root.MakeBucket(ctx, "trainyard", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	put := func(m *minio.Client, key string) error {
		_, err := m.PutObject(ctx, "trainyard", key, bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{})
		return err
	}
	for _, k := range []string{"secrets/join/lab/abc", "plugins/modules/m", "policies/current.json"} {
		if err := put(root, k); err != nil {
			t.Fatal(err)
		}
	}
	ac, err := srv.GrantAgents(ctx, "trainyard")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := srv.GrantAgents(ctx, "trainyard"); err != nil || again != ac {
		t.Fatalf("second GrantAgents: %v, keys changed: %v", err, again != ac)
	}
	agent := client(ac)
	get := func(key string) error {
		o, err := agent.GetObject(ctx, "trainyard", key, minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer o.Close()
		_, err = o.Stat()
		return err
	}
	for _, tc := range []struct {
		what  string
		do    func() error
		allow bool
	}{
		{"bucket exists", func() error { _, err := agent.BucketExists(ctx, "trainyard"); return err }, true},
		{"write a checkpoint", func() error { return put(agent, "checkpoints/run-1/0001") }, true},
		{"read it back", func() error { return get("checkpoints/run-1/0001") }, true},
		{"write a log", func() error { return put(agent, "logs/job-1/0") }, true},
		{"read a plugin", func() error { return get("plugins/modules/m") }, true},
		{"read a join token", func() error { return get("secrets/join/lab/abc") }, false},
		{"read a join token through ../", func() error { return get("checkpoints/../secrets/join/lab/abc") }, false},
		{"write a join token", func() error { return put(agent, "secrets/join/lab/mine") }, false},
		{"overwrite the policy bundle", func() error { return put(agent, "policies/current.json") }, false},
		{"replace a plugin", func() error { return put(agent, "plugins/modules/m") }, false},
		{"remove the bucket policy", func() error { return agent.SetBucketPolicy(ctx, "trainyard", "") }, false},
		{"remove the bucket", func() error { return agent.RemoveBucket(ctx, "trainyard") }, false},
		{"make a bucket", func() error { return agent.MakeBucket(ctx, "mine", minio.MakeBucketOptions{}) }, false},
	} {
		err := tc.do()
		if tc.allow && err != nil {
			t.Errorf("%s: %v, want allowed", tc.what, err)
		}
		if !tc.allow && err == nil {
			t.Errorf("%s: allowed, want refused", tc.what)
		}
	}
}
