// Package weightsync is the weight-sync step of LLM-in-the-loop RL: the
// trainer's new weights become a checkpoint in S3 (internal/checkpoint,
// content-defined chunks, so a LoRA or partial update uploads little), and
// every inference endpoint serving the policy is told to load it, in the
// way its type expects. Once an endpoint confirms, its client reports the
// new weight version, which every later trajectory records.
package weightsync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/inference"
)

// SpanPublish is the span of one Publish.
const SpanPublish = "weightsync.publish"

// Syncer publishes weights of one run to its endpoints.
type Syncer struct {
	Store     *checkpoint.Store
	Bucket    string // for the s3:// URI endpoints receive
	Run       string // checkpoint run name of the weights, e.g. "<run>-weights"
	Endpoints []*inference.Client
	HTTP      *http.Client  // default http.DefaultClient
	Timeout   time.Duration // per notification (default 2m: loading weights is slow)
}

// Published is the outcome of one Publish.
type Published struct {
	Version  int64         `json:"version"` // the checkpoint's sequence number
	URI      string        `json:"uri"`     // s3://bucket/<manifest key>
	Bytes    int64         `json:"bytes"`
	Uploaded int64         `json:"uploaded"`
	Notified []string      `json:"notified"`
	Failed   []string      `json:"failed,omitempty"` // "endpoint: reason"
	Took     time.Duration `json:"took"`
}

// Notification is the JSON body webhooks receive.
type Notification struct {
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	Version  int64  `json:"version"`
	URI      string `json:"uri"`
}

// Publish saves dir as the next weights checkpoint and notifies every
// endpoint. Endpoints that fail keep their old version (and are listed in
// Failed); the error is non-nil only when the upload fails or no endpoint
// took the new weights.
func (s *Syncer) Publish(ctx context.Context, dir string, meta checkpoint.Meta) (Published, error) {
	ctx, span := otel.Tracer("github.com/trainyard/trainyard/internal/weightsync").Start(ctx, SpanPublish,
		trace.WithAttributes(attribute.String("trainyard.run", s.Run)))
	defer span.End()
	start := time.Now()
	m, st, err := s.Store.SaveDir(ctx, s.Run, dir, meta)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return Published{}, fmt.Errorf("publish weights of %s: %w", s.Run, err)
	}
	p := Published{Version: m.Seq, URI: "s3://" + s.Bucket + "/" + s.Store.ManifestKey(s.Run, m.Seq), Bytes: st.BytesTotal, Uploaded: st.BytesUploaded}
	span.SetAttributes(inference.AttrVersion.Int64(p.Version))
	for _, c := range s.Endpoints {
		if err := s.notify(ctx, c, p); err != nil {
			p.Failed = append(p.Failed, c.Endpoint().Name+": "+err.Error())
			continue
		}
		c.SetWeightVersion(p.Version)
		p.Notified = append(p.Notified, c.Endpoint().Name)
	}
	p.Took = time.Since(start)
	if len(p.Notified) == 0 && len(s.Endpoints) > 0 {
		err := fmt.Errorf("publish weights of %s v%d: no endpoint loaded them: %s", s.Run, p.Version, strings.Join(p.Failed, "; "))
		span.SetStatus(codes.Error, err.Error())
		return p, err
	}
	return p, nil
}

// notify tells one endpoint to load version p, by its type.
func (s *Syncer) notify(ctx context.Context, c *inference.Client, p Published) error {
	ep := c.Endpoint()
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if len(ep.ReloadCommand) > 0 {
		cmd := exec.CommandContext(ctx, ep.ReloadCommand[0], ep.ReloadCommand[1:]...)
		cmd.Env = append(os.Environ(), "TRAINYARD_WEIGHTS_URI="+p.URI, "TRAINYARD_WEIGHTS_VERSION="+strconv.FormatInt(p.Version, 10),
			"TRAINYARD_ENDPOINT="+ep.Name, "TRAINYARD_MODEL="+ep.Model)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("reload command: %w: %s", err, tail(out, 300))
		}
		return nil
	}
	base := ep.ReloadURL
	var url string
	var body any
	switch ep.Type {
	case inference.TypeWebhook:
		url, body = base, Notification{Endpoint: ep.Name, Model: ep.Model, Version: p.Version, URI: p.URI}
	case inference.TypeSGLang:
		if base == "" {
			base = ep.URL
		}
		url, body = strings.TrimRight(base, "/")+"/update_weights_from_disk", map[string]any{"model_path": p.URI}
	case inference.TypeVLLM:
		if base == "" {
			base = ep.URL
		}
		url, body = strings.TrimRight(base, "/")+"/v1/load_lora_adapter", map[string]any{"lora_name": ep.Model, "lora_path": p.URI}
	default:
		return errors.New("endpoint type " + strconv.Quote(ep.Type) + " cannot load weights (set type webhook with reload_url, or reload_command)")
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	hc := s.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("reload %s: %w", url, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("reload %s: HTTP %d: %s", url, res.StatusCode, tail(out, 300))
	}
	return nil
}

func tail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
