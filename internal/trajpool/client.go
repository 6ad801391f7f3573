package trajpool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Client is a rollout worker's side of a pool served by Handler on
// another node. Put retries until the pool takes the trajectory or ctx
// ends: a pool that is away (its trainer being placed again) makes the
// worker wait, with the reason reported through Waiting, rather than lose
// the episode.
type Client struct {
	URL  string       // the pool's base URL, e.g. http://10.0.0.5:41234
	HTTP *http.Client // default: one without a timeout (a put waits while the pool is full)
	// Waiting, when set, is told why a put waits ("" once it went
	// through); called from many goroutines.
	Waiting func(reason string)

	once sync.Once
}

func (c *Client) http() *http.Client {
	c.once.Do(func() {
		if c.HTTP == nil {
			// Keep a connection per worker goroutine: the default two idle
			// per host would open and close one for most puts.
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = 1024
			c.HTTP = &http.Client{Transport: tr}
		}
	})
	return c.HTTP
}

// Put posts t, retrying with backoff (up to 5 s apart) while the pool is
// unreachable or answers 5xx. A 4xx is a bug in the request: it is
// returned.
func (c *Client) Put(ctx context.Context, t Trajectory) error {
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("trajectory pool: encode episode %d: %w", t.Episode, err)
	}
	if err := c.retry(ctx, func() error { return c.post(ctx, b) }); err != nil {
		return fmt.Errorf("trajectory pool: put episode %d: %w", t.Episode, err)
	}
	return nil
}

// Accepted fetches the episodes the pool has accepted, retrying like Put
// while it is away.
func (c *Client) Accepted(ctx context.Context) (Ledger, error) {
	var l Ledger
	err := c.retry(ctx, func() (err error) { l, err = c.accepted(ctx); return err })
	if err != nil {
		return l, fmt.Errorf("trajectory pool %s: accepted episodes: %w", c.URL, err)
	}
	return l, nil
}

// retry calls try until it succeeds, fails for good (a permanentError) or
// ctx ends, telling Waiting why it waits.
func (c *Client) retry(ctx context.Context, try func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := try()
		var perm *permanentError
		switch {
		case err == nil:
			if c.Waiting != nil {
				c.Waiting("")
			}
			return nil
		case errors.As(err, &perm):
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
		if c.Waiting != nil {
			c.Waiting("waiting for the trajectory pool at " + c.URL + ": " + err.Error())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

type permanentError struct{ msg string }

func (e *permanentError) Error() string { return e.msg }

func (c *Client) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.URL, "/")+"/v1/trajectories", bytes.NewReader(body))
	if err != nil {
		return &permanentError{err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.http().Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 2048))
	switch {
	case res.StatusCode/100 == 2:
		return nil
	case res.StatusCode/100 == 4 && res.StatusCode != http.StatusGone:
		return &permanentError{fmt.Sprintf("trajectory pool %s refused a trajectory: HTTP %d: %s", c.URL, res.StatusCode, bytes.TrimSpace(msg))}
	default: // 5xx, and 410 of a pool closing while its trainer restarts, are transient
		return fmt.Errorf("HTTP %d: %s", res.StatusCode, bytes.TrimSpace(msg))
	}
}

func (c *Client) accepted(ctx context.Context) (Ledger, error) {
	var l Ledger
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.URL, "/")+"/v1/accepted", nil)
	if err != nil {
		return l, err
	}
	res, err := c.http().Do(req)
	if err != nil {
		return l, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 2048))
		err := fmt.Errorf("HTTP %d: %s", res.StatusCode, bytes.TrimSpace(msg))
		if res.StatusCode/100 == 4 {
			return l, &permanentError{err.Error()}
		}
		return l, err
	}
	return l, json.NewDecoder(res.Body).Decode(&l)
}
