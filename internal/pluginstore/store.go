// Package pluginstore keeps uploaded WASM plugins in S3, content-addressed:
//
//	plugins/modules/<sha256>.wasm   the module bytes
//	plugins/index/<sha256>.json     its record (metadata, size, uploader)
//
// The record is written after the module, and listings read only records,
// so a half-finished upload is never visible.
package pluginstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
)

const (
	modulePrefix = "plugins/modules/"
	indexPrefix  = "plugins/index/"
)

// ErrNotFound is returned when no plugin matches an id or name.
var ErrNotFound = errors.New("plugin not found")

// ErrAmbiguous is returned when a name matches plugins of several versions
// and the caller did not say which.
var ErrAmbiguous = errors.New("plugin reference is ambiguous")

// Record is a stored plugin.
type Record struct {
	ID         string              `json:"id" doc:"sha256 of the module"`
	Name       string              `json:"name"`
	Version    string              `json:"version"`
	Kind       string              `json:"kind" enum:"env,reward,game"`
	SizeBytes  int64               `json:"size_bytes"`
	UploadedAt time.Time           `json:"uploaded_at"`
	UploadedBy string              `json:"uploaded_by,omitempty"`
	Metadata   pluginhost.Metadata `json:"metadata"`
}

// Store reads and writes plugin records and modules.
type Store struct{ s3 *objstore.Store }

// New wraps an S3 bucket.
func New(s3 *objstore.Store) *Store { return &Store{s3: s3} }

// Put stores a validated module. Storing the same bytes again is a no-op
// that returns the existing record.
func (s *Store) Put(ctx context.Context, wasm []byte, md pluginhost.Metadata, uploader string) (Record, error) {
	id := pluginhost.SHA256(wasm)
	if rec, err := s.Get(ctx, id); err == nil {
		return rec, nil
	}
	rec := Record{ID: id, Name: md.Name, Version: md.Version, Kind: string(md.Kind), SizeBytes: int64(len(wasm)),
		UploadedAt: time.Now().UTC(), UploadedBy: uploader, Metadata: md}
	_, err := s.s3.Client.PutObject(ctx, s.s3.Bucket, modulePrefix+id+".wasm", bytes.NewReader(wasm), int64(len(wasm)),
		minio.PutObjectOptions{ContentType: "application/wasm", SendContentMd5: true})
	if err != nil {
		return Record{}, fmt.Errorf("store plugin %s module: %w", md.Label(), err)
	}
	b, _ := json.Marshal(rec)
	_, err = s.s3.Client.PutObject(ctx, s.s3.Bucket, indexPrefix+id+".json", bytes.NewReader(b), int64(len(b)),
		minio.PutObjectOptions{ContentType: "application/json"})
	if err != nil {
		return Record{}, fmt.Errorf("store plugin %s record: %w", md.Label(), err)
	}
	return rec, nil
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Get returns the record of a plugin by sha256 id.
func (s *Store) Get(ctx context.Context, id string) (Record, error) {
	if !shaRE.MatchString(id) {
		return Record{}, fmt.Errorf("plugin %q: %w", id, ErrNotFound)
	}
	obj, err := s.s3.Client.GetObject(ctx, s.s3.Bucket, indexPrefix+id+".json", minio.GetObjectOptions{})
	if err != nil {
		return Record{}, fmt.Errorf("plugin %s: %w", id, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return Record{}, fmt.Errorf("plugin %s: %w", id, ErrNotFound)
		}
		return Record{}, fmt.Errorf("plugin %s: %w", id, err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, fmt.Errorf("plugin %s: corrupt record: %w", id, err)
	}
	return rec, nil
}

// Resolve finds a plugin by sha256 id, by "name@version", or by a name that
// has exactly one version stored. Uploads shadow built-ins: a user's
// CartPole-v1 is what "CartPole-v1" means once it is stored.
func (s *Store) Resolve(ctx context.Context, ref string) (Record, error) {
	if shaRE.MatchString(ref) {
		return s.Get(ctx, ref)
	}
	name, version, _ := strings.Cut(ref, "@")
	all, err := s.List(ctx)
	if err != nil {
		return Record{}, err
	}
	var hits []Record
	for _, r := range all {
		if r.Name == name && (version == "" || r.Version == version) {
			hits = append(hits, r)
		}
	}
	if users := slices.DeleteFunc(slices.Clone(hits), func(r Record) bool { return r.UploadedBy == BuiltinBy }); len(users) > 0 {
		hits = users // an upload shadows the built-ins of its name
	}
	switch len(hits) {
	case 0:
		return Record{}, fmt.Errorf("plugin %q: %w", ref, ErrNotFound)
	case 1:
		return hits[0], nil
	default:
		var vs []string
		for _, h := range hits {
			vs = append(vs, h.Name+"@"+h.Version+" ("+h.ID[:12]+")")
		}
		return Record{}, fmt.Errorf("plugin %q matches %s: %w", ref, strings.Join(vs, ", "), ErrAmbiguous)
	}
}

// List returns every stored plugin, newest first.
func (s *Store) List(ctx context.Context) ([]Record, error) {
	var out []Record
	for o := range s.s3.Client.ListObjects(ctx, s.s3.Bucket, minio.ListObjectsOptions{Prefix: indexPrefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("list plugins: %w", o.Err)
		}
		id := strings.TrimSuffix(strings.TrimPrefix(o.Key, indexPrefix), ".json")
		rec, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UploadedAt.After(out[j].UploadedAt) })
	return out, nil
}

// Module returns a plugin's bytes, verified against its content address.
func (s *Store) Module(ctx context.Context, id string) ([]byte, error) {
	if !shaRE.MatchString(id) {
		return nil, fmt.Errorf("plugin %q: %w", id, ErrNotFound)
	}
	obj, err := s.s3.Client.GetObject(ctx, s.s3.Bucket, modulePrefix+id+".wasm", minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("plugin %s module: %w", id, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, fmt.Errorf("plugin %s module: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("plugin %s module: %w", id, err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != id {
		return nil, fmt.Errorf("plugin %s module: checksum mismatch (stored bytes hash to %s)", id, got)
	}
	return b, nil
}

// Delete removes the record first (so the plugin disappears from listings
// at once), then the module.
func (s *Store) Delete(ctx context.Context, id string) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	if err := s.s3.Client.RemoveObject(ctx, s.s3.Bucket, indexPrefix+id+".json", minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("delete plugin %s: %w", id, err)
	}
	if err := s.s3.Client.RemoveObject(ctx, s.s3.Bucket, modulePrefix+id+".wasm", minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("delete plugin %s module: %w", id, err)
	}
	return nil
}
