// Package admission is the policy decision point: it keeps the current
// policy bundle (in S3, seeded from the embedded default), decides every
// submission with it, logs each decision, and evaluates proposed bundles
// against recent submissions before they replace the current one.
package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/policies"
)

const (
	currentKey = "policies/current.json"
	historyDir = "policies/revisions/"
	recentMax  = 200
)

// ErrTestsFailed refuses a bundle whose own Rego tests fail.
var ErrTestsFailed = errors.New("policy tests failed")

// Service decides admissions with the current bundle.
type Service struct {
	store     *objstore.Store
	decisions metric.Int64Counter

	mu     sync.RWMutex
	engine *policy.Engine
	etag   string // of policies/current.json when engine was loaded or pushed
	log    *policy.Log
	recent []Submission // newest last; the "queue" a dry run replays
}

// Submission is one evaluated piece of work, kept for dry runs.
type Submission struct {
	WorkID string       `json:"work_id"`
	Input  policy.Input `json:"input"`
}

// Open loads the current bundle from S3, or the embedded default when none
// was pushed yet.
func Open(ctx context.Context, store *objstore.Store) (*Service, error) {
	b, etag, err := load(ctx, store)
	if err != nil {
		return nil, err
	}
	e, err := policy.New(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("current policy bundle: %w", err)
	}
	counter, err := otel.Meter("trainyard/admission").Int64Counter("trainyard.admission.decisions",
		metric.WithDescription("Admission decisions by result (allow, deny)."))
	if err != nil {
		return nil, err
	}
	return &Service{store: store, decisions: counter, engine: e, etag: etag, log: policy.NewLog(1000)}, nil
}

// Default is the embedded bundle.
func Default() (policy.Bundle, error) { return policy.LoadFS(policies.FS) }

// load reads the bundle in force and its ETag ("" for the default).
func load(ctx context.Context, store *objstore.Store) (policy.Bundle, string, error) {
	if store == nil {
		b, err := Default()
		return b, "", err
	}
	obj, err := store.Client.GetObject(ctx, store.Bucket, currentKey, minio.GetObjectOptions{})
	if err != nil {
		return policy.Bundle{}, "", fmt.Errorf("load policies: %w", err)
	}
	defer obj.Close()
	raw, err := io.ReadAll(obj)
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		b, err := Default()
		return b, "", err
	}
	if err != nil {
		return policy.Bundle{}, "", fmt.Errorf("load policies: %w", err)
	}
	info, err := obj.Stat()
	if err != nil {
		return policy.Bundle{}, "", fmt.Errorf("load policies: %w", err)
	}
	var b policy.Bundle
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&b); err != nil {
		return policy.Bundle{}, "", fmt.Errorf("load policies %s: %w", currentKey, err)
	}
	return b, info.ETag, nil
}

// Refresh puts in force a bundle pushed through another process (a second
// server replica; a separate worker places with its params): when
// policies/current.json changed since this service loaded or pushed its
// bundle, it is loaded and compiled. It reports whether the bundle changed.
func (s *Service) Refresh(ctx context.Context) (bool, error) {
	info, err := s.store.Client.StatObject(ctx, s.store.Bucket, currentKey, minio.StatObjectOptions{})
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("refresh policies: %w", err)
	}
	s.mu.RLock()
	same := info.ETag == s.etag
	s.mu.RUnlock()
	if same {
		return false, nil
	}
	b, etag, err := load(ctx, s.store)
	if err != nil {
		return false, err
	}
	e, err := policy.New(ctx, b)
	if err != nil {
		return false, fmt.Errorf("refresh policies: %w", err)
	}
	s.mu.Lock()
	s.engine, s.etag = e, etag
	s.mu.Unlock()
	return true, nil
}

// Watch refreshes every interval until ctx ends, logging each change and
// failure.
func (s *Service) Watch(ctx context.Context, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := s.Refresh(ctx)
		switch {
		case err != nil:
			log.Warn("policy bundle refresh failed; the bundle in force stays", "err", err)
		case changed:
			e := s.Engine()
			log.Info("policy bundle pushed elsewhere is now in force", "revision", e.Revision(), "evaluator", e.Evaluator())
		}
	}
}

// Current returns the bundle in force.
func (s *Service) Current() policy.Bundle {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.engine.Bundle()
}

// Engine returns the engine in force (its Params feed the scheduler).
func (s *Service) Engine() *policy.Engine {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.engine
}

// Test runs a bundle's Rego unit tests.
func (s *Service) Test(ctx context.Context, b policy.Bundle) ([]policy.TestResult, error) {
	return policy.RunTests(ctx, b)
}

// Push compiles b, runs its tests and, when they all pass, stores it (a
// revision copy first, then the current pointer) and puts it in force. It
// returns the engine now in force.
func (s *Service) Push(ctx context.Context, b policy.Bundle) (*policy.Engine, []policy.TestResult, error) {
	e, err := policy.New(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	results, err := policy.RunTests(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range results {
		if !r.Pass && !r.Skip {
			return nil, results, fmt.Errorf("%w: %s %s", ErrTestsFailed, r.Name, r.Error)
		}
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, results, err
	}
	var etag string
	for _, key := range []string{historyDir + b.Revision() + ".json", currentKey} {
		info, err := s.store.Client.PutObject(ctx, s.store.Bucket, key, bytes.NewReader(raw), int64(len(raw)),
			minio.PutObjectOptions{ContentType: "application/json"})
		if err != nil {
			return nil, results, fmt.Errorf("store policies: %w", err)
		}
		etag = info.ETag
	}
	s.mu.Lock()
	s.engine, s.etag = e, etag
	s.mu.Unlock()
	return e, results, nil
}

// Decide evaluates one submission with the current bundle, logs the
// decision and remembers the input for dry runs.
func (s *Service) Decide(ctx context.Context, workID string, in policy.Input) (policy.Decision, error) {
	d, err := s.Evaluate(ctx, workID, in)
	if err != nil {
		return d, err
	}
	s.Record(ctx, workID, in, d)
	return d, nil
}

// Evaluate decides one submission with the current bundle and logs
// nothing: a caller that may decide the same work again (on a fresher
// view) records only the decision it acts on.
func (s *Service) Evaluate(ctx context.Context, workID string, in policy.Input) (policy.Decision, error) {
	d, err := s.Engine().Decide(ctx, in)
	if err != nil {
		return d, fmt.Errorf("admission of %s: %w", workID, err)
	}
	return d, nil
}

// Record logs a decision Evaluate made and remembers its input for dry runs.
func (s *Service) Record(ctx context.Context, workID string, in policy.Input, d policy.Decision) {
	result := "deny"
	if d.Allow {
		result = "allow"
	}
	s.decisions.Add(ctx, 1, metric.WithAttributes(attribute.String("result", result)))
	s.mu.Lock()
	s.log.Append(time.Now().UTC(), workID, d)
	s.recent = append(s.recent, Submission{WorkID: workID, Input: in})
	if len(s.recent) > recentMax {
		s.recent = s.recent[len(s.recent)-recentMax:]
	}
	s.mu.Unlock()
}

// Decisions lists logged decisions after sequence number after.
func (s *Service) Decisions(after int64, limit int) []policy.LogEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.log.List(after, limit)
}

// DryRun evaluates proposed against the recent submissions (plus extra)
// and returns those whose decision would change, with why.
func (s *Service) DryRun(ctx context.Context, proposed policy.Bundle, extra []Submission) ([]policy.Change, int, error) {
	// extra (the live queue, decided on today's usage) replaces a recent
	// submission of the same work.
	live := map[string]bool{}
	for _, it := range extra {
		live[it.WorkID] = true
	}
	s.mu.RLock()
	var items []Submission
	for _, it := range s.recent {
		if !live[it.WorkID] {
			items = append(items, it)
		}
	}
	items = append(items, extra...)
	current := s.engine.Bundle()
	s.mu.RUnlock()
	inputs := make([]policy.Input, len(items))
	for i, it := range items {
		inputs[i] = it.Input
		inputs[i].Work.ID = it.WorkID
	}
	changes, err := policy.DryRun(ctx, current, proposed, inputs)
	return changes, len(inputs), err
}
