// Package objstore connects to the S3 bucket where Trainyard keeps plugins,
// checkpoints and datasets. Any S3 works: the embedded gateway, MinIO, AWS, R2.
package objstore

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Config names an S3 endpoint and bucket. Empty keys mean: read credentials
// the way the AWS tools do (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/
// AWS_SESSION_TOKEN, then ~/.aws/credentials, then instance metadata).
type Config struct {
	Endpoint        string // host:port or URL; https unless Insecure or http://
	Bucket          string
	Region          string
	AccessKeyID     string
	SecretAccessKey string
	Insecure        bool // plain HTTP
}

// Store is a bucket on an S3 endpoint.
type Store struct {
	Client *minio.Client
	Bucket string
	watch  *watch
}

// Stalled says why S3 has not answered this store's requests for longer
// than after, or "" (also for a Store not made by Open).
func (s *Store) Stalled(after time.Duration) string {
	if s == nil || s.watch == nil {
		return ""
	}
	return s.watch.stalled(after)
}

// Open connects and makes sure the bucket exists.
func Open(ctx context.Context, c Config) (*Store, error) {
	endpoint, secure := c.Endpoint, !c.Insecure
	if u, err := url.Parse(c.Endpoint); err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
		endpoint, secure = u.Host, u.Scheme == "https"
	}
	if endpoint == "" {
		return nil, fmt.Errorf("s3: no endpoint configured")
	}
	var creds *credentials.Credentials
	if c.AccessKeyID != "" {
		creds = credentials.NewStaticV4(c.AccessKeyID, c.SecretAccessKey, "")
	} else {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{},
		})
	}
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", endpoint, err)
	}
	w := newWatch(tr)
	cl, err := minio.New(endpoint, &minio.Options{Creds: creds, Secure: secure, Region: c.Region, Transport: w})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", endpoint, err)
	}
	s := &Store{Client: cl, Bucket: c.Bucket, watch: w}
	if err := s.ensureBucket(ctx, c.Region); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) ensureBucket(ctx context.Context, region string) error {
	ok, err := s.Client.BucketExists(ctx, s.Bucket)
	if err != nil {
		return fmt.Errorf("s3 bucket %s: %w", s.Bucket, err)
	}
	if ok {
		return nil
	}
	err = s.Client.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: region})
	if err != nil {
		// Another process may have created it between the check and here.
		if resp := minio.ToErrorResponse(err); resp.Code == "BucketAlreadyOwnedByYou" || strings.Contains(resp.Code, "AlreadyExists") {
			return nil
		}
		return fmt.Errorf("create s3 bucket %s: %w", s.Bucket, err)
	}
	return nil
}

// Ping checks that the bucket is reachable with the configured credentials.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := s.Client.BucketExists(ctx, s.Bucket); err != nil {
		return fmt.Errorf("s3 bucket %s: %w", s.Bucket, err)
	}
	return nil
}
