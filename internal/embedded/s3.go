package embedded

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/embedgw"

	"github.com/trainyard/trainyard/internal/atomicfile"
)

// S3Credentials are the root keys of the embedded gateway.
type S3Credentials struct {
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
}

// S3 is a running embedded S3 gateway (versitygw, POSIX backend).
type S3 struct {
	Endpoint    string // host:port, plain HTTP
	Credentials S3Credentials
	iam         auth.IAMService
	cancel      context.CancelFunc
	done        chan error
}

// LoadOrCreateS3Credentials reads the gateway's root keys from file, or
// generates and stores them (0600) on first start.
func LoadOrCreateS3Credentials(file string) (S3Credentials, error) {
	var c S3Credentials
	b, err := os.ReadFile(file)
	if err == nil {
		if err := json.Unmarshal(b, &c); err != nil || c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return c, fmt.Errorf("read s3 credentials %s: malformed file", file)
		}
		return c, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return c, fmt.Errorf("read s3 credentials: %w", err)
	}
	c = S3Credentials{AccessKeyID: "TY" + randomString(18), SecretAccessKey: randomString(40)}
	b, _ = json.MarshalIndent(c, "", "  ")
	if err := atomicfile.Write(file, b, 0o600); err != nil {
		return c, fmt.Errorf("store s3 credentials: %w", err)
	}
	return c, nil
}

// StartS3 serves an S3 API on ip:port (0 picks a free port, see FreePort)
// storing buckets as directories under dir, and its accounts (besides the
// root keys) in dir+"-iam". A port asked for that another process holds is
// an error that says so.
func StartS3(ip string, port int, dir string, creds S3Credentials) (*S3, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("s3 data dir: %w", err)
	}
	iamDir := dir + "-iam"
	if err := os.MkdirAll(iamDir, 0o700); err != nil {
		return nil, fmt.Errorf("s3 accounts dir: %w", err)
	}
	if port == 0 {
		p, err := FreePort(ip)
		if err != nil {
			return nil, err
		}
		port = p
	} else if err := checkRequestedPort("s3 gateway", ip, port); err != nil {
		return nil, err
	}
	be, err := posix.New(dir, meta.XattrMeta{}, posix.PosixOpts{})
	if err != nil {
		return nil, fmt.Errorf("s3 posix backend at %s (needs a filesystem with extended attributes): %w", dir, err)
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	ctx, cancel := context.WithCancel(context.Background())
	cfg := &embedgw.Config{
		RootUserAccess:    creds.AccessKeyID,
		RootUserSecret:    creds.SecretAccessKey,
		Ports:             []string{addr},
		MaxConnections:    1000,
		MaxRequests:       500,
		MultipartMaxParts: 10000,
		Quiet:             true,
		HealthPath:        "/_health",
		IAMDir:            iamDir,
		// The cache's prune loop spins with embedgw's zero defaults, and
		// one account needs no cache.
		IAMCacheDisable: true,
	}
	iam, err := auth.New(cfg.IamOpts())
	if err != nil {
		cancel()
		return nil, fmt.Errorf("s3 accounts at %s: %w", iamDir, err)
	}
	cfg.IAMService = iam
	s := &S3{Endpoint: addr, Credentials: creds, iam: iam, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- embedgw.RunVersityGW(ctx, be, cfg) }()
	if err := waitTCP(addr); err != nil {
		cancel()
		select {
		case runErr := <-s.done:
			return nil, fmt.Errorf("s3 gateway: %w", runErr)
		default:
			return nil, fmt.Errorf("s3 gateway: %w", err)
		}
	}
	return s, nil
}

// AgentAccess is the access key of the account agents get.
const AgentAccess = "trainyard-agent"

// GrantAgents makes (once) the gateway's agent account and sets bucket's
// policy so that account reads and writes the bucket's objects but not
// secrets/ (clusters' join tokens), and cannot change the policy bundle
// (policies/), the plugins (plugins/) or the bucket itself: an agent's
// host holds these keys, never the root ones.
func (s *S3) GrantAgents(ctx context.Context, bucket string) (S3Credentials, error) {
	c := S3Credentials{AccessKeyID: AgentAccess}
	if a, err := s.iam.GetUserAccount(AgentAccess); err == nil {
		c.SecretAccessKey = a.Secret
	} else {
		c.SecretAccessKey = randomString(40)
		if err := s.iam.CreateAccount(auth.Account{Access: c.AccessKeyID, Secret: c.SecretAccessKey, Role: auth.RoleUser}); err != nil {
			return c, fmt.Errorf("s3 agent account: %w", err)
		}
	}
	root, err := minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.Credentials.AccessKeyID, s.Credentials.SecretAccessKey, "")})
	if err != nil {
		return c, fmt.Errorf("s3 agent policy: %w", err)
	}
	if err := root.SetBucketPolicy(ctx, bucket, AgentPolicy(bucket, AgentAccess)); err != nil {
		return c, fmt.Errorf("s3 agent policy on %s: %w", bucket, err)
	}
	return c, nil
}

// AgentPolicy is the bucket policy GrantAgents sets, for access key.
func AgentPolicy(bucket, access string) string {
	arn := "arn:aws:s3:::" + bucket
	stmt := func(effect string, actions []string, resources ...string) map[string]any {
		return map[string]any{"Effect": effect, "Principal": map[string]any{"AWS": []string{access}}, "Action": actions, "Resource": resources}
	}
	p := map[string]any{"Version": "2012-10-17", "Statement": []any{
		stmt("Allow", []string{"s3:*"}, arn, arn+"/*"),
		stmt("Deny", []string{"s3:*"}, arn+"/secrets/*"),
		stmt("Deny", []string{"s3:PutObject", "s3:DeleteObject"}, arn+"/policies/*", arn+"/plugins/*"),
		stmt("Deny", []string{"s3:DeleteBucket", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:PutBucketAcl"}, arn),
	}}
	b, _ := json.Marshal(p)
	return string(b)
}

// Stop shuts the gateway down and waits for it.
func (s *S3) Stop() {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
}

func waitTCP(addr string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening after 15s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func randomString(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
