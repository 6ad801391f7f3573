package plugin

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// HTTP capability (docs/plugin-abi.md §9): a plugin that declares
// "http:<endpoint>" in Metadata.Capabilities and is granted that endpoint by
// its run calls it by name. The host owns the URL, the credentials, retries,
// timeouts and the run's rate limit; the plugin sees only the response.

// Errors of HTTP, matched with errors.Is.
var (
	ErrNotAllowed  = errors.New("capability http: endpoint not allowed")
	ErrRateLimited = errors.New("capability http: rate limited")
	ErrTimeout     = errors.New("capability http: timed out")
	ErrTooLarge    = errors.New("capability http: too large")
	ErrBadRequest  = errors.New("capability http: bad request")
	ErrUnavailable = errors.New("capability http: endpoint unavailable")
	// ErrNoHost is returned outside a Trainyard host (native builds).
	ErrNoHost = errors.New("capability http: not running under a Trainyard host")
)

// HTTPResponseCap is the size of the response buffer HTTP hands the host.
var HTTPResponseCap = 256 << 10

// HTTPError is a refused or failed request with the host's message.
type HTTPError struct {
	Code    int // the ABI's negative code, positive here
	Message string
}

func (e *HTTPError) Error() string { return e.Message }

func (e *HTTPError) Unwrap() error {
	switch e.Code {
	case 2:
		return ErrNotAllowed
	case 3:
		return ErrRateLimited
	case 4:
		return ErrTimeout
	case 5:
		return ErrTooLarge
	case 6:
		return ErrBadRequest
	case 7:
		return ErrUnavailable
	}
	return nil
}

// HTTP sends path (under /v1/) with body (POST; GET when empty) to the
// granted endpoint and returns the HTTP status and response body.
func HTTP(endpoint, path string, body []byte) (status int, resp []byte, err error) {
	if len(endpoint) == 0 || len(endpoint) > 63 || len(path) > 1024 {
		return 0, nil, fmt.Errorf("%w: endpoint %q or path of %d bytes out of range", ErrBadRequest, endpoint, len(path))
	}
	req := make([]byte, 0, 3+len(endpoint)+len(path)+len(body))
	req = append(req, byte(len(endpoint)))
	req = append(req, endpoint...)
	req = binary.LittleEndian.AppendUint16(req, uint16(len(path)))
	req = append(req, path...)
	req = append(req, body...)
	buf := make([]byte, HTTPResponseCap)
	code, n, err := httpRequest(req, buf)
	if err != nil {
		return 0, nil, err
	}
	if code < 0 {
		return 0, nil, &HTTPError{Code: -code, Message: string(buf[:n])}
	}
	return code, buf[:n], nil
}

// ChatMessage is one message of a chat completion.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Chat asks the endpoint's model (the run decides which model that is) for
// a chat completion and returns the first choice's content.
func Chat(endpoint string, messages []ChatMessage, maxTokens int) (string, error) {
	body, err := json.Marshal(struct {
		Messages  []ChatMessage `json:"messages"`
		MaxTokens int           `json:"max_tokens,omitempty"`
	}{messages, maxTokens})
	if err != nil {
		return "", err
	}
	status, resp, err := HTTP(endpoint, "/v1/chat/completions", body)
	if err != nil {
		return "", err
	}
	if status != 200 {
		return "", fmt.Errorf("chat %s: HTTP %d: %.200s", endpoint, status, resp)
	}
	var out struct {
		Choices []struct {
			Message ChatMessage `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(resp, &out); err != nil {
		return "", fmt.Errorf("chat %s: decode response: %w", endpoint, err)
	}
	if len(out.Choices) == 0 {
		return "", fmt.Errorf("chat %s: no choices in the response", endpoint)
	}
	return out.Choices[0].Message.Content, nil
}
