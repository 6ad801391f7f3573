package inference

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// SpanRequest is the span of one Client.Do (all its attempts).
const SpanRequest = "inference.request"

// Span attribute keys.
const (
	AttrEndpoint = attribute.Key("trainyard.inference.endpoint")
	AttrPath     = attribute.Key("trainyard.inference.path")
	AttrStatus   = attribute.Key("http.response.status_code")
	AttrAttempts = attribute.Key("trainyard.inference.attempts")
	AttrVersion  = attribute.Key("trainyard.inference.weight_version")
	AttrQueued   = attribute.Key("trainyard.inference.queued_seconds")
)

// Errors of Client.Do.
var (
	ErrTooLarge    = errors.New("response exceeds the size cap")
	ErrUnavailable = errors.New("endpoint unavailable after retries")
)

// ClientOptions configure a Client.
type ClientOptions struct {
	Secrets       Secrets // default HostSecrets
	Retry         Retry
	HTTP          *http.Client // default: a client with keep-alives sized to the concurrency limit
	MeterProvider metric.MeterProvider
}

// Client calls one endpoint. At most MaxConcurrency requests are in flight;
// further callers wait for a slot (back-pressure, counted in
// trainyard.inference.saturated). Safe for concurrent use.
type Client struct {
	ep    Endpoint
	hc    *http.Client
	auth  string // "Bearer <key>" or empty; never logged
	retry Retry
	sem   chan struct{}
	// version is the weight version the endpoint serves (weightsync.go
	// bumps it after a successful reload); every response carries it.
	version atomic.Int64

	inflight  atomic.Int64
	saturated metric.Int64Counter
	queued    metric.Float64Histogram
	latency   metric.Float64Histogram
	attempts  metric.Int64Counter
	retries   metric.Int64Counter
}

// NewClient validates ep, resolves its credentials and returns a client.
func NewClient(ep Endpoint, o ClientOptions) (*Client, error) {
	if err := ep.Validate(); err != nil {
		return nil, err
	}
	if o.Secrets == nil {
		o.Secrets = HostSecrets{}
	}
	key, err := o.Secrets.Resolve(ep.CredentialsRef)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", ep.Name, err)
	}
	c := &Client{ep: ep, hc: o.HTTP, retry: o.Retry.withDefaults(), sem: make(chan struct{}, ep.maxConcurrency())}
	if key != "" {
		c.auth = "Bearer " + key
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = ep.maxConcurrency()
		tr.MaxConnsPerHost = ep.maxConcurrency()
		c.hc = &http.Client{Transport: tr}
	}
	mp := o.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter("github.com/trainyard/trainyard/internal/inference")
	c.saturated, _ = m.Int64Counter("trainyard.inference.saturated", metric.WithUnit("{request}"),
		metric.WithDescription("requests that waited for a concurrency slot of their endpoint"))
	c.queued, _ = m.Float64Histogram("trainyard.inference.queue.duration", metric.WithUnit("s"),
		metric.WithDescription("time waiting for a concurrency slot"))
	c.latency, _ = m.Float64Histogram("trainyard.inference.request.duration", metric.WithUnit("s"),
		metric.WithDescription("duration of one call, all attempts"))
	c.attempts, _ = m.Int64Counter("trainyard.inference.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("HTTP attempts by outcome"))
	c.retries, _ = m.Int64Counter("trainyard.inference.retries", metric.WithUnit("{attempt}"),
		metric.WithDescription("attempts retried after a 429, 5xx, timeout or transport error"))
	if _, err := m.Int64ObservableGauge("trainyard.inference.inflight", metric.WithUnit("{request}"),
		metric.WithDescription("requests in flight to the endpoint"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(c.inflight.Load(), metric.WithAttributes(AttrEndpoint.String(ep.Name)))
			return nil
		})); err != nil {
		return nil, fmt.Errorf("endpoint %s: metrics: %w", ep.Name, err)
	}
	return c, nil
}

// Endpoint is the client's endpoint definition.
func (c *Client) Endpoint() Endpoint { return c.ep }

// WeightVersion is the weight version the endpoint is known to serve.
func (c *Client) WeightVersion() int64 { return c.version.Load() }

// SetWeightVersion records that the endpoint now serves version v.
func (c *Client) SetWeightVersion(v int64) { c.version.Store(v) }

// InFlight is the number of requests in flight.
func (c *Client) InFlight() int { return int(c.inflight.Load()) }

// Response is the outcome of Do.
type Response struct {
	Status        int
	Body          []byte
	Attempts      int
	WeightVersion int64         // endpoint's weight version when the answer came
	Queued        time.Duration // waiting for a concurrency slot
}

// Do sends method path with body, retrying 429, 5xx, attempt timeouts and
// transport errors with full-jitter exponential backoff while ctx allows.
// A final non-retryable status (e.g. 400) is returned, not an error. The
// response body is capped at maxResp bytes (ErrTooLarge beyond).
func (c *Client) Do(ctx context.Context, method, path string, body []byte, maxResp int) (Response, error) {
	ctx, span := otel.Tracer("github.com/trainyard/trainyard/internal/inference").Start(ctx, SpanRequest,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrEndpoint.String(c.ep.Name), AttrPath.String(path)))
	defer span.End()
	start := time.Now()
	resp, err := c.do(ctx, method, path, body, maxResp)
	span.SetAttributes(AttrAttempts.Int(resp.Attempts), AttrVersion.Int64(resp.WeightVersion), AttrQueued.Float64(resp.Queued.Seconds()))
	if resp.Status != 0 {
		span.SetAttributes(AttrStatus.Int(resp.Status))
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	c.latency.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(AttrEndpoint.String(c.ep.Name), attribute.String("outcome", outcome)))
	return resp, err
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, maxResp int) (Response, error) {
	var resp Response
	url := strings.TrimRight(c.ep.URL, "/") + path
	var last error
	for attempt := 1; attempt <= c.retry.MaxAttempts; attempt++ {
		if attempt > 1 {
			c.retries.Add(ctx, 1, metric.WithAttributes(AttrEndpoint.String(c.ep.Name)))
			if err := sleep(ctx, c.backoff(attempt-1, last)); err != nil {
				return resp, fmt.Errorf("endpoint %s %s: %w (after %d attempts, last: %v)", c.ep.Name, path, err, resp.Attempts, last)
			}
		}
		q, err := c.acquire(ctx)
		resp.Queued += q
		if err != nil {
			return resp, fmt.Errorf("endpoint %s %s: waiting for a concurrency slot: %w", c.ep.Name, path, err)
		}
		resp.Attempts = attempt
		status, b, retryAfter, err := c.attempt(ctx, method, url, body, maxResp)
		c.release()
		switch {
		case errors.Is(err, ErrTooLarge):
			c.countAttempt(ctx, "too_large")
			return resp, fmt.Errorf("endpoint %s %s: %w of %d bytes", c.ep.Name, path, err, maxResp)
		case err != nil:
			c.countAttempt(ctx, "error")
			if ctx.Err() != nil {
				return resp, fmt.Errorf("endpoint %s %s: %w (after %d attempts)", c.ep.Name, path, ctx.Err(), attempt)
			}
			last = err
			continue
		case status == http.StatusTooManyRequests || status >= 500:
			c.countAttempt(ctx, strconv.Itoa(status))
			last = &statusError{status: status, retryAfter: retryAfter, body: string(head(b, 200))}
			continue
		}
		c.countAttempt(ctx, strconv.Itoa(status))
		resp.Status, resp.Body, resp.WeightVersion = status, b, c.version.Load()
		return resp, nil
	}
	return resp, fmt.Errorf("endpoint %s %s: %w: %d attempts, last: %v", c.ep.Name, path, ErrUnavailable, resp.Attempts, last)
}

func (c *Client) countAttempt(ctx context.Context, outcome string) {
	c.attempts.Add(ctx, 1, metric.WithAttributes(AttrEndpoint.String(c.ep.Name), attribute.String("outcome", outcome)))
}

// acquire waits for a concurrency slot.
func (c *Client) acquire(ctx context.Context) (time.Duration, error) {
	select {
	case c.sem <- struct{}{}:
		c.inflight.Add(1)
		return 0, nil
	default:
	}
	c.saturated.Add(ctx, 1, metric.WithAttributes(AttrEndpoint.String(c.ep.Name)))
	start := time.Now()
	select {
	case c.sem <- struct{}{}:
		c.inflight.Add(1)
		q := time.Since(start)
		c.queued.Record(ctx, q.Seconds(), metric.WithAttributes(AttrEndpoint.String(c.ep.Name)))
		return q, nil
	case <-ctx.Done():
		return time.Since(start), ctx.Err()
	}
}

func (c *Client) release() {
	c.inflight.Add(-1)
	<-c.sem
}

// attempt is one HTTP exchange under the attempt timeout.
func (c *Client) attempt(ctx context.Context, method, url string, body []byte, maxResp int) (int, []byte, time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, c.retry.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, int64(maxResp)+1))
	if err != nil {
		return 0, nil, 0, err
	}
	if len(b) > maxResp {
		return res.StatusCode, nil, 0, ErrTooLarge
	}
	var ra time.Duration
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
		ra = time.Duration(s) * time.Second
	}
	return res.StatusCode, b, ra, nil
}

// backoff is full jitter: uniform in [0, min(max, base·2^n)), or the
// server's Retry-After when it asks for longer (capped at MaxBackoff).
func (c *Client) backoff(n int, last error) time.Duration {
	ceil := c.retry.BaseBackoff << min(n-1, 20)
	if ceil > c.retry.MaxBackoff || ceil <= 0 {
		ceil = c.retry.MaxBackoff
	}
	d := time.Duration(rand.Int64N(int64(ceil)) + 1)
	var se *statusError
	if errors.As(last, &se) && se.retryAfter > d {
		d = min(se.retryAfter, c.retry.MaxBackoff)
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type statusError struct {
	status     int
	retryAfter time.Duration
	body       string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d %s", e.status, strings.TrimSpace(e.body))
}

func head(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
