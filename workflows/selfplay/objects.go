package selfplay

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/selfplay"
)

// Object layout under Prefix(loop) (docs/selfplay.md):
//
//	gen-000003/games/a01-000007.json.gz   one sync batch (attempt 1, batch 7)
//	gen-000003/selfplay.npz               the generation's export
//	models/gen-000003.model               the generation's candidate
func genPrefix(loopID string, gen int) string {
	return fmt.Sprintf("%sgen-%06d/", Prefix(loopID), gen)
}

// GamesPrefix is where a generation's game batches are.
func GamesPrefix(loopID string, gen int) string { return genPrefix(loopID, gen) + "games/" }

func batchKey(loopID string, gen, attempt, seq int) string {
	return fmt.Sprintf("%sa%02d-%06d.json.gz", GamesPrefix(loopID, gen), attempt, seq)
}

// DatasetKey is a generation's .npz export.
func DatasetKey(loopID string, gen int) string { return genPrefix(loopID, gen) + "selfplay.npz" }

// ModelKey is a generation's candidate model.
func ModelKey(loopID string, gen int) string {
	return fmt.Sprintf("%smodels/gen-%06d.model", Prefix(loopID), gen)
}

// Numbered is a game with its index in the generation (its seed's offset).
type Numbered struct {
	Index int           `json:"i"`
	Game  selfplay.Game `json:"game"`
}

// Batch is one sync upload of finished games.
type Batch struct {
	Generation int        `json:"generation"`
	Attempt    int        `json:"attempt"`
	Seq        int        `json:"seq"`
	Node       string     `json:"node,omitempty"`
	ObsShape   []int      `json:"obs_shape"`
	Games      []Numbered `json:"games"`
}

func put(ctx context.Context, s *objstore.Store, key string, b []byte, contentType string) error {
	if _, err := s.Client.PutObject(ctx, s.Bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{ContentType: contentType}); err != nil {
		return fmt.Errorf("s3 put %s: %w", key, err)
	}
	return nil
}

func get(ctx context.Context, s *objstore.Store, key string) ([]byte, error) {
	obj, err := s.Client.GetObject(ctx, s.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("s3 get %s: %w", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		return nil, fmt.Errorf("s3 get %s: %w", key, err)
	}
	return b, nil
}

func list(ctx context.Context, s *objstore.Store, prefix string) ([]string, error) {
	var keys []string
	for o := range s.Client.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("s3 list %s: %w", prefix, o.Err)
		}
		keys = append(keys, o.Key)
	}
	sort.Strings(keys)
	return keys, nil
}

func putBatch(ctx context.Context, s *objstore.Store, key string, b Batch) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(b); err != nil {
		return fmt.Errorf("encode batch %s: %w", key, err)
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return put(ctx, s, key, buf.Bytes(), "application/gzip")
}

// ReadGames reads every synced game of a generation, each index once (a
// retry never replays a synced index, but a batch uploaded twice must
// not count twice), ordered by index; obsShape comes from the batches.
func ReadGames(ctx context.Context, s *objstore.Store, loopID string, gen int) (games []Numbered, obsShape []int, err error) {
	keys, err := list(ctx, s, GamesPrefix(loopID, gen))
	if err != nil {
		return nil, nil, err
	}
	seen := map[int]bool{}
	for _, k := range keys {
		if !strings.HasSuffix(k, ".json.gz") {
			continue
		}
		raw, err := get(ctx, s, k)
		if err != nil {
			return nil, nil, err
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, nil, fmt.Errorf("batch %s: %w", k, err)
		}
		var b Batch
		if err := json.NewDecoder(zr).Decode(&b); err != nil {
			return nil, nil, fmt.Errorf("batch %s: %w", k, err)
		}
		obsShape = b.ObsShape
		for _, g := range b.Games {
			if !seen[g.Index] {
				seen[g.Index] = true
				games = append(games, g)
			}
		}
	}
	sort.Slice(games, func(i, j int) bool { return games[i].Index < games[j].Index })
	return games, obsShape, nil
}
