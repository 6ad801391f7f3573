package inference

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// The chat-completions wire format (the subset Trainyard reads and writes).
type (
	ChatMessage struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	ChatRequest struct {
		Model       string        `json:"model"`
		Messages    []ChatMessage `json:"messages"`
		MaxTokens   int           `json:"max_tokens,omitempty"`
		Temperature *float64      `json:"temperature,omitempty"`
	}
	ChatChoice struct {
		Index        int         `json:"index"`
		Message      ChatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	}
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
	ChatResponse struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []ChatChoice `json:"choices"`
		Usage   Usage        `json:"usage"`
	}
)

// ChatPath is the chat-completions route.
const ChatPath = "/v1/chat/completions"

// Chat sends one chat completion with the endpoint's model.
func (c *Client) Chat(ctx context.Context, messages []ChatMessage, maxResp int) (ChatResponse, Response, error) {
	body, err := json.Marshal(ChatRequest{Model: c.ep.Model, Messages: messages})
	if err != nil {
		return ChatResponse{}, Response{}, err
	}
	resp, err := c.Do(ctx, http.MethodPost, ChatPath, body, maxResp)
	if err != nil {
		return ChatResponse{}, resp, err
	}
	if resp.Status != http.StatusOK {
		return ChatResponse{}, resp, fmt.Errorf("endpoint %s: chat: HTTP %d: %s", c.ep.Name, resp.Status, head(resp.Body, 200))
	}
	var cr ChatResponse
	if err := json.Unmarshal(resp.Body, &cr); err != nil {
		return cr, resp, fmt.Errorf("endpoint %s: chat: decode response: %w", c.ep.Name, err)
	}
	if len(cr.Choices) == 0 {
		return cr, resp, fmt.Errorf("endpoint %s: chat: response has no choices", c.ep.Name)
	}
	return cr, resp, nil
}

// Health is the outcome of a health check.
type Health struct {
	Endpoint  string        `json:"endpoint"`
	Healthy   bool          `json:"healthy"`
	Models    []string      `json:"models,omitempty"`
	Latency   time.Duration `json:"latency"`
	Error     string        `json:"error,omitempty"`
	CheckedAt time.Time     `json:"checked_at"`
}

// Check asks GET /v1/models (one attempt, timeout from ctx) and reports the
// endpoint healthy when it answers 200 and lists the declared model.
func (c *Client) Check(ctx context.Context) Health {
	h := Health{Endpoint: c.ep.Name, CheckedAt: time.Now().UTC()}
	start := time.Now()
	q, err := c.acquire(ctx)
	if err != nil {
		h.Error = "saturated: " + err.Error()
		return h
	}
	status, b, _, err := c.attempt(ctx, http.MethodGet, c.ep.URL+"/v1/models", nil, 1<<20)
	c.release()
	h.Latency = time.Since(start) - q
	switch {
	case err != nil:
		h.Error = err.Error()
		return h
	case status != http.StatusOK:
		h.Error = fmt.Sprintf("GET /v1/models: HTTP %d", status)
		return h
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		h.Error = "GET /v1/models: " + err.Error()
		return h
	}
	for _, m := range list.Data {
		h.Models = append(h.Models, m.ID)
		if m.ID == c.ep.Model {
			h.Healthy = true
		}
	}
	if !h.Healthy {
		h.Error = fmt.Sprintf("model %q not served (serves %v)", c.ep.Model, h.Models)
	}
	return h
}
