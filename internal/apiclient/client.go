// Package apiclient is the CLI's HTTP client for the Trainyard API. Errors
// come back as *Problem, built from the server's RFC 9457 documents, so the
// CLI can print one readable line.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client talks to one Trainyard API with one token.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
}

// New returns a client for baseURL authenticating with token.
func New(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token, HTTP: &http.Client{Timeout: 15 * time.Minute}}
}

// Problem is an API error.
type Problem struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Errors []struct {
		Location string `json:"location"`
		Message  string `json:"message"`
	} `json:"errors"`
	retryAfter time.Duration // a 429's Retry-After
}

// policyDenial: an admission policy refused the work (its rules are the
// error locations "policy.RULE"), which no other token changes.
func (p *Problem) policyDenial() bool {
	for _, e := range p.Errors {
		if strings.HasPrefix(e.Location, "policy.") {
			return true
		}
	}
	return false
}

func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", p.Status, p.Title)
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	for _, e := range p.Errors {
		if e.Location != "" {
			fmt.Fprintf(&b, "; %s: %s", e.Location, e.Message)
		} else {
			fmt.Fprintf(&b, "; %s", e.Message)
		}
	}
	switch p.Status {
	case http.StatusUnauthorized:
		b.WriteString(" (hint: set TRAINYARD_TOKEN or --token)")
	case http.StatusForbidden:
		if !p.policyDenial() {
			b.WriteString(" (hint: ask an admin for a token with a higher role)")
		}
	}
	return b.String()
}

// JSON sends in (if non-nil) as JSON and decodes the response into out.
func (c *Client) JSON(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	return c.Do(ctx, method, path, body, ct, out)
}

// Upload sends file as the multipart form field named field. progress,
// when non-nil, is called as the body goes out (bytes sent, body size);
// the server answers only after it has validated the upload.
func (c *Client) Upload(ctx context.Context, path, field, filename string, data []byte, out any, progress func(sent, total int64)) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := make(map[string][]string)
	h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name=%q; filename=%q`, field, filename)}
	h["Content-Type"] = []string{"application/wasm"}
	pw, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := pw.Write(data); err != nil {
		return err
	}
	if err := mw.Close(); err != nil {
		return err
	}
	var body io.Reader = &buf
	if progress != nil {
		body = &progressReader{r: &buf, total: int64(buf.Len()), fn: progress}
	}
	return c.Do(ctx, http.MethodPost, path, body, mw.FormDataContentType(), out)
}

// progressReader reports how much of a body of known size was read.
type progressReader struct {
	r     io.Reader
	sent  int64
	total int64
	fn    func(sent, total int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	// Small reads, so a fast loopback upload still shows movement.
	if len(b) > 256<<10 {
		b = b[:256<<10]
	}
	n, err := p.r.Read(b)
	if n > 0 {
		p.sent += int64(n)
		p.fn(p.sent, p.total)
	}
	return n, err
}

// busyRetries is how often a GET answered 429 ("the control plane is busy,
// retry after N s") is retried after the time it names, as kubectl does.
const busyRetries = 3

// Do performs a request; out may be nil, a *[]byte for raw bytes, or a
// pointer to decode JSON into. A GET answered 429 is retried after its
// Retry-After (at most 30 s), busyRetries times; other methods are not
// (a submission may have been taken).
func (c *Client) Do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	for attempt := 1; ; attempt++ {
		err := c.do(ctx, method, path, body, contentType, out)
		var p *Problem
		if method != http.MethodGet || attempt > busyRetries || !errors.As(err, &p) || p.Status != http.StatusTooManyRequests {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(min(p.retryAfter, 30*time.Second)):
		}
	}
}

func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return err
	}
	if p, ok := body.(*progressReader); ok { // a sized body, not chunked
		req.ContentLength = p.total
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the Trainyard API at %s: %w (is `trainyard dev` running? set --url or TRAINYARD_URL)", c.BaseURL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		p := problem(resp.StatusCode, raw)
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			p.retryAfter = time.Duration(secs) * time.Second
		} else {
			p.retryAfter = time.Second
		}
		return p
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *[]byte:
		*o = raw
		return nil
	default:
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decode response: %w", method, path, err)
		}
		return nil
	}
}

// problem is an error answer as a *Problem, whether or not it is one.
func problem(status int, raw []byte) *Problem {
	p := &Problem{}
	if json.Unmarshal(raw, p) != nil || p.Status == 0 {
		p = &Problem{Status: status, Title: http.StatusText(status), Detail: strings.TrimSpace(string(raw))}
	}
	return p
}

// Stream GETs path and copies the answer to w as it arrives, with no
// overall timeout: a followed log lasts as long as its job.
func (c *Client) Stream(ctx context.Context, path string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	h := *c.HTTP
	h.Timeout = 0
	resp, err := h.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the Trainyard API at %s: %w (is `trainyard dev` running? set --url or TRAINYARD_URL)", c.BaseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return problem(resp.StatusCode, raw)
	}
	if _, err := io.Copy(w, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
