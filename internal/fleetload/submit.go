package fleetload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"time"
)

// submitted is one accepted job.
type submitted struct {
	ID       string
	Spec     jobSpec
	Sent     time.Time // when the POST that was accepted was sent
	Accepted time.Time // when its answer came
}

// submitter posts jobs at up to a rate from a pool of goroutines, each
// taking the next job when the rate allows and it is free: a slow API
// slows the load down rather than queueing requests without bound.
type submitter struct {
	api      *apiClient
	rate     float64
	workers  int
	attempts int // per job, counting 429 and 503 answers retried
	// breaker stops the load after this many POSTs in a row without an
	// answer (timeouts, refused connections): a control plane that
	// stopped answering would hold each worker a minute a job. A 429 is
	// an answer, and retried.
	breaker int
	// onAccept is told of each accepted job (the tracker follows it).
	onAccept func(submitted)
	// maxOpen, when > 0, holds submissions while that many accepted jobs
	// have not ended (open counts them): a closed loop, which keeps a
	// slow control plane out of the backlog an open-loop rate builds.
	maxOpen int
	open    func() int

	mu       sync.Mutex
	accepted []submitted
	ids      []string
	too      int            // 429 answers
	errs     map[string]int // other failures, by status or kind
	noted    map[int]bool   // statuses whose first answer is kept
	firstErr []string
	first    time.Time
	last     time.Time
	lat      samples
	inARow   int
	broke    bool
	stop     context.CancelFunc
}

func newSubmitter(api *apiClient, rate float64, workers int, onAccept func(submitted)) *submitter {
	workers = max(1, workers)
	return &submitter{api: api, rate: rate, workers: workers, attempts: 5, breaker: max(20, 2*workers), onAccept: onAccept, errs: map[string]int{}, noted: map[int]bool{}}
}

// run submits jobs and returns when all were answered, ctx ended or the
// breaker tripped.
func (s *submitter) run(ctx context.Context, jobs []jobSpec) {
	ctx, s.stop = context.WithCancel(ctx)
	defer s.stop()
	next := make(chan jobSpec)
	go s.pace(ctx, jobs, next)
	var wg sync.WaitGroup
	for range s.workers {
		wg.Go(func() {
			for j := range next {
				s.submit(ctx, j)
			}
		})
	}
	wg.Wait()
}

// pace hands out jobs no faster than the rate; a tick missed while every
// worker is busy is dropped (time.Ticker), so the rate is an upper bound.
func (s *submitter) pace(ctx context.Context, jobs []jobSpec, next chan<- jobSpec) {
	defer close(next)
	t := time.NewTicker(time.Duration(float64(time.Second) / s.rate))
	defer t.Stop()
	for _, j := range jobs {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for s.maxOpen > 0 && s.open() >= s.maxOpen && ctx.Err() == nil {
			sleep(ctx, 50*time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case next <- j:
		}
	}
}

// submit posts one job, retrying a busy control plane's 429s and 503s
// after their Retry-After (at most 5 s: the load keeps its pace). A
// timeout or a dropped connection is not retried: the job may have been
// started.
func (s *submitter) submit(ctx context.Context, j jobSpec) {
	for attempt := 1; ; attempt++ {
		var ref workflowRef
		sent := time.Now()
		err := s.api.call(ctx, http.MethodPost, "/v1/jobs", j.Body, &ref)
		took := time.Since(sent)
		if ctx.Err() != nil {
			return
		}
		s.lat.add(took, err != nil)
		if err == nil {
			s.accept(submitted{ID: ref.WorkflowID, Spec: j, Sent: sent, Accepted: sent.Add(took)})
			return
		}
		var ae *apiError
		busy := errors.As(err, &ae) && (ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable)
		s.failed(ae)
		if !busy || attempt >= s.attempts {
			s.count("gave up")
			return
		}
		sleep(ctx, min(max(ae.RetryAfter, 500*time.Millisecond), 5*time.Second))
	}
}

func (s *submitter) accept(sub submitted) {
	s.mu.Lock()
	s.inARow = 0
	s.accepted = append(s.accepted, sub)
	s.ids = append(s.ids, sub.ID)
	if s.first.IsZero() {
		s.first = sub.Accepted
	}
	s.last = sub.Accepted
	s.mu.Unlock()
	if s.onAccept != nil {
		s.onAccept(sub)
	}
}

// failed counts one failed POST by its status (429 on its own); ae is
// nil for a transport error.
func (s *submitter) failed(ae *apiError) {
	s.mu.Lock()
	if ae != nil {
		s.inARow = 0
	} else if s.inARow++; s.inARow >= s.breaker && !s.broke {
		s.broke = true
		s.stop()
	}
	s.mu.Unlock()
	switch {
	case ae != nil && ae.Status == http.StatusTooManyRequests:
		s.mu.Lock()
		s.too++
		s.mu.Unlock()
	case ae != nil:
		s.count(fmt.Sprintf("HTTP %d", ae.Status))
		s.note(ae)
	default:
		s.count("transport")
	}
}

func (s *submitter) count(kind string) {
	s.mu.Lock()
	s.errs[kind]++
	s.mu.Unlock()
}

// note keeps the first answer of each status other than 429 (why jobs
// were refused: a 422 body names the field).
func (s *submitter) note(ae *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.noted[ae.Status] {
		s.noted[ae.Status] = true
		s.firstErr = append(s.firstErr, fmt.Sprintf("HTTP %d: %.300s", ae.Status, ae.Body))
	}
}

// jobIDs are the accepted jobs' ids so far (the sampler picks from them).
func (s *submitter) jobIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids
}

// summary sums the submissions.
func (s *submitter) summary(requested int) Submit {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Submit{Requested: requested, Accepted: len(s.accepted), Status429: s.too, Errors: map[string]int{}, Latency: s.lat.summary(), FirstErrors: s.firstErr, Stopped: s.broke}
	maps.Copy(out.Errors, s.errs)
	if span := s.last.Sub(s.first).Seconds(); span > 0 {
		out.AcceptedPerSec = round1(float64(len(s.accepted)-1) / span)
		out.Seconds = round1(span)
	}
	return out
}
