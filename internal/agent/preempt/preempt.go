// Package preempt watches a cloud provider's metadata endpoint for the
// notice it gives before reclaiming a spot or preemptible machine (AWS:
// two minutes, GCP: 30 seconds), so the agent can checkpoint its work
// before the machine goes instead of losing a checkpoint interval.
package preempt

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Notice is a provider's warning that the machine is about to go.
type Notice struct {
	Source   string    // aws, gcp or the URL polled
	Action   string    // e.g. terminate, stop (AWS); preempted (GCP)
	Deadline time.Time // when the machine goes, as the provider says or assumes
}

func (n Notice) String() string {
	return fmt.Sprintf("preemption notice from %s (%s by %s)", n.Source, n.Action, n.Deadline.UTC().Format(time.RFC3339))
}

// Source is one way of asking whether a notice was given.
type Source struct {
	kind   string // aws | gcp | http
	base   string
	client *http.Client
	token  string
	tokExp time.Time
}

// Default metadata endpoints.
const (
	AWSMetadata = "http://169.254.169.254"
	GCPMetadata = "http://metadata.google.internal"
	// gcpWarning is how long GCP waits after the notice.
	gcpWarning = 30 * time.Second
)

// Parse reads a source spec: "aws" or "gcp" (their metadata servers),
// "aws:URL" or "gcp:URL" (the same protocol at another address, e.g. a
// test server or a proxy), or an http(s) URL answering 404 or 204 while
// there is no notice and 200 once there is (an AWS-style JSON body with
// "action" and "time" is understood; any other body means "now").
func Parse(spec string) (*Source, error) {
	s := &Source{client: &http.Client{Timeout: 2 * time.Second}}
	kind, base, _ := strings.Cut(spec, ":")
	switch {
	case spec == "aws":
		s.kind, s.base = "aws", AWSMetadata
	case spec == "gcp":
		s.kind, s.base = "gcp", GCPMetadata
	case (kind == "aws" || kind == "gcp") && isURL(base):
		s.kind, s.base = kind, strings.TrimSuffix(base, "/")
	case isURL(spec):
		s.kind, s.base = "http", spec
	default:
		return nil, fmt.Errorf("preemption notice source %q: want aws, gcp, aws:URL, gcp:URL or an http(s) URL", spec)
	}
	return s, nil
}

func isURL(s string) bool { return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") }

// Name is the source as configured, for logs.
func (s *Source) Name() string {
	if s.kind == "http" {
		return s.base
	}
	return s.kind
}

// Check asks once. ok is false while there is no notice.
func (s *Source) Check(ctx context.Context) (n Notice, ok bool, err error) {
	switch s.kind {
	case "aws":
		return s.checkAWS(ctx)
	case "gcp":
		return s.checkGCP(ctx)
	default:
		return s.checkHTTP(ctx)
	}
}

// checkAWS reads spot/instance-action, with an IMDSv2 session token when the
// metadata server hands one out (IMDSv1 otherwise).
func (s *Source) checkAWS(ctx context.Context) (Notice, bool, error) {
	if s.token == "" || time.Now().After(s.tokExp) {
		s.token = ""
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.base+"/latest/api/token", nil)
		if err != nil {
			return Notice{}, false, err
		}
		req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "300")
		if code, body, err := s.do(req); err == nil && code == http.StatusOK {
			s.token, s.tokExp = strings.TrimSpace(string(body)), time.Now().Add(4*time.Minute)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/latest/meta-data/spot/instance-action", nil)
	if err != nil {
		return Notice{}, false, err
	}
	if s.token != "" {
		req.Header.Set("X-aws-ec2-metadata-token", s.token)
	}
	code, body, err := s.do(req)
	if err != nil {
		return Notice{}, false, err
	}
	switch code {
	case http.StatusNotFound:
		return Notice{}, false, nil
	case http.StatusOK:
		return parseAction("aws", body), true, nil
	case http.StatusUnauthorized:
		s.token = "" // expired session token: a new one next time
	}
	return Notice{}, false, fmt.Errorf("aws instance-action: HTTP %d", code)
}

func (s *Source) checkGCP(ctx context.Context) (Notice, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/computeMetadata/v1/instance/preempted", nil)
	if err != nil {
		return Notice{}, false, err
	}
	req.Header.Set("Metadata-Flavor", "Google")
	code, body, err := s.do(req)
	if err != nil {
		return Notice{}, false, err
	}
	if code != http.StatusOK {
		return Notice{}, false, fmt.Errorf("gcp preempted: HTTP %d", code)
	}
	if strings.TrimSpace(string(body)) != "TRUE" {
		return Notice{}, false, nil
	}
	return Notice{Source: "gcp", Action: "preempted", Deadline: time.Now().Add(gcpWarning)}, true, nil
}

func (s *Source) checkHTTP(ctx context.Context) (Notice, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base, nil)
	if err != nil {
		return Notice{}, false, err
	}
	code, body, err := s.do(req)
	if err != nil {
		return Notice{}, false, err
	}
	switch code {
	case http.StatusNotFound, http.StatusNoContent:
		return Notice{}, false, nil
	case http.StatusOK:
		return parseAction(s.base, body), true, nil
	}
	return Notice{}, false, fmt.Errorf("%s: HTTP %d", s.base, code)
}

// parseAction reads AWS's {"action": "terminate", "time": "..."}; anything
// else is a notice with no stated deadline (taken as now).
func parseAction(source string, body []byte) Notice {
	n := Notice{Source: source, Action: "terminate", Deadline: time.Now()}
	var a struct {
		Action string    `json:"action"`
		Time   time.Time `json:"time"`
	}
	if json.Unmarshal(body, &a) == nil {
		if a.Action != "" {
			n.Action = a.Action
		}
		if !a.Time.IsZero() {
			n.Deadline = a.Time
		}
	}
	return n
}

func (s *Source) do(req *http.Request) (int, []byte, error) {
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, body, err
}

// Watch polls src every interval until a notice arrives (handed to notify,
// once) or ctx ends. Errors are logged when they start and when they stop,
// not on every poll.
func Watch(ctx context.Context, src *Source, interval time.Duration, log *slog.Logger, notify func(Notice)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		n, ok, err := src.Check(ctx)
		switch {
		case ok:
			notify(n)
			return
		case err != nil && !failing && ctx.Err() == nil:
			log.Warn("preemption notice source not answering", "source", src.Name(), "err", err)
			failing = true
		case err == nil && failing:
			log.Info("preemption notice source answering again", "source", src.Name())
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
