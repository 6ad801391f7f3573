package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

type problem struct {
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Location string `json:"location"`
		Message  string `json:"message"`
	} `json:"errors"`
}

// TestDevSurvivesKillAndServesEverything is the spine's acceptance test:
// a workflow started through the API with a token completes, the Web UI
// lists it, S3 serves (multipart too) and refuses wrong keys, auth errors
// are problem documents, and after SIGKILL and a restart on the same data
// dir the workflow's history and the objects are still there.
func TestDevSurvivesKillAndServesEverything(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dev := startDev(t, dir)

	// A workflow through the REST API.
	var ref struct {
		WorkflowID string `json:"workflow_id"`
	}
	if code, _, raw := dev.call("POST", "/v1/healthchecks", dev.admin, map[string]string{"note": "e2e"}, &ref); code != http.StatusCreated {
		t.Fatalf("start healthcheck: %d %s", code, raw)
	}
	wf := waitWorkflow(t, dev, ref.WorkflowID)
	if wf.Status != "completed" || wf.Result["note"] != "e2e" {
		t.Fatalf("workflow ended %q with result %v (error %q)", wf.Status, wf.Result, wf.Error)
	}

	t.Run("auth", func(t *testing.T) {
		code, hdr, raw := dev.call("POST", "/v1/healthchecks", "", map[string]string{}, nil)
		assertProblem(t, code, hdr, raw, http.StatusUnauthorized, "")
		code, hdr, raw = dev.call("GET", "/v1/workflows", "ty_not_a_token", nil, nil)
		assertProblem(t, code, hdr, raw, http.StatusUnauthorized, "")

		var viewer struct {
			Token string `json:"token"`
		}
		if code, _, raw := dev.call("POST", "/v1/tokens", dev.admin, map[string]string{"name": "reader", "role": "viewer"}, &viewer); code != http.StatusCreated {
			t.Fatalf("create viewer token: %d %s", code, raw)
		}
		if code, _, raw := dev.call("GET", "/v1/workflows/"+ref.WorkflowID, viewer.Token, nil, nil); code != http.StatusOK {
			t.Fatalf("viewer read: %d %s", code, raw)
		}
		code, hdr, raw = dev.call("POST", "/v1/healthchecks", viewer.Token, map[string]string{}, nil)
		assertProblem(t, code, hdr, raw, http.StatusForbidden, "")
		code, hdr, raw = dev.call("POST", "/v1/tokens", viewer.Token, map[string]string{"name": "x", "role": "admin"}, nil)
		assertProblem(t, code, hdr, raw, http.StatusForbidden, "")

		code, hdr, raw = dev.call("POST", "/v1/tokens", dev.admin, `{"name": 5, "role": "viewer"}`, nil)
		assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "body.name")
		code, hdr, raw = dev.call("POST", "/v1/tokens", dev.admin, `{"name": "ok", "role": "root"}`, nil)
		assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "body.role")
	})

	t.Run("temporal web ui", func(t *testing.T) {
		resp, err := http.Get(dev.ep.TemporalUI + "/")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(strings.ToLower(string(page)), "<html") {
			t.Fatalf("UI root: %d %.200s", resp.StatusCode, page)
		}
		resp, err = http.Get(dev.ep.TemporalUI + "/api/v1/namespaces/default/workflows?query=" + url.QueryEscape("WorkflowId='"+ref.WorkflowID+"'"))
		if err != nil {
			t.Fatal(err)
		}
		list, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(list), ref.WorkflowID) {
			t.Fatalf("UI does not list %s: %d %.300s", ref.WorkflowID, resp.StatusCode, list)
		}
	})

	// S3 with the generated credentials.
	s3c := s3Client(t, dev, "")
	ctx := context.Background()
	small := []byte("hello trainyard")
	if _, err := s3c.PutObject(ctx, dev.ep.Bucket, "e2e/small.txt", bytes.NewReader(small), int64(len(small)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put small: %v", err)
	}
	big := make([]byte, 17<<20+123) // above 16 MiB and not part-aligned
	rand.Read(big)
	bigSum := sha256.Sum256(big)
	info, err := s3c.PutObject(ctx, dev.ep.Bucket, "e2e/big.bin", bytes.NewReader(big), int64(len(big)), minio.PutObjectOptions{PartSize: 5 << 20})
	if err != nil {
		t.Fatalf("multipart put: %v", err)
	}
	if !strings.Contains(info.ETag, "-") {
		t.Errorf("big object ETag %q is not a multipart ETag", info.ETag)
	}
	assertObjects(t, s3c, dev.ep.Bucket, map[string][32]byte{"e2e/small.txt": sha256.Sum256(small), "e2e/big.bin": bigSum})

	bad := s3Client(t, dev, "wrong-secret")
	if _, err := bad.PutObject(ctx, dev.ep.Bucket, "e2e/nope", bytes.NewReader(small), int64(len(small)), minio.PutObjectOptions{}); err == nil {
		t.Fatal("put with a wrong secret key succeeded")
	}
	if _, err := bad.StatObject(ctx, dev.ep.Bucket, "e2e/small.txt", minio.StatObjectOptions{}); err == nil {
		t.Fatal("stat with a wrong secret key succeeded")
	}

	// Crash and come back on the same directory.
	dev.kill(syscall.SIGKILL)
	dev2 := startDev(t, dir)
	var hist struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	if code, _, raw := dev2.call("GET", "/v1/workflows/"+ref.WorkflowID+"/history", dev2.admin, nil, &hist); code != 200 {
		t.Fatalf("history after restart: %d %s", code, raw)
	}
	var types []string
	for _, e := range hist.Events {
		types = append(types, e.Type)
	}
	if len(types) < 5 || types[0] != "WorkflowExecutionStarted" || types[len(types)-1] != "WorkflowExecutionCompleted" {
		t.Fatalf("history after restart: %v", types)
	}
	if wf2 := waitWorkflow(t, dev2, ref.WorkflowID); wf2.Result["note"] != "e2e" {
		t.Fatalf("result after restart: %v", wf2.Result)
	}
	assertObjects(t, s3Client(t, dev2, ""), dev2.ep.Bucket, map[string][32]byte{"e2e/small.txt": sha256.Sum256(small), "e2e/big.bin": bigSum})

	// Clean shutdown on SIGTERM; logged, not asserted on time.
	t.Logf("SIGTERM shutdown took %v", dev2.kill(syscall.SIGTERM))
	if code := dev2.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("dev exited %d after SIGTERM; log:\n%s", code, dev2.log())
	}
}

type workflowView struct {
	Status string         `json:"status"`
	Result map[string]any `json:"result"`
	Error  string         `json:"error"`
}

func waitWorkflow(t *testing.T, dev *devProc, id string) workflowView {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var wf workflowView
		code, _, raw := dev.call("GET", "/v1/workflows/"+id, dev.admin, nil, &wf)
		if code != 200 {
			t.Fatalf("get workflow: %d %s", code, raw)
		}
		if wf.Status != "running" {
			return wf
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s still running after 60s", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func assertProblem(t *testing.T, code int, hdr http.Header, raw []byte, want int, location string) {
	t.Helper()
	if code != want {
		t.Fatalf("status %d, want %d: %s", code, want, raw)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("content type %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal(raw, &p); err != nil || p.Status != want || p.Detail == "" {
		t.Fatalf("not a problem document: %s", raw)
	}
	if location == "" {
		return
	}
	for _, e := range p.Errors {
		if e.Location == location && e.Message != "" {
			return
		}
	}
	t.Fatalf("problem does not name %s: %s", location, raw)
}

func s3Client(t *testing.T, dev *devProc, secretOverride string) *minio.Client {
	t.Helper()
	var creds struct {
		AccessKeyID     string `json:"access_key_id"`
		SecretAccessKey string `json:"secret_access_key"`
	}
	b, err := os.ReadFile(dev.ep.S3Credentials)
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &creds)
	if secretOverride != "" {
		creds.SecretAccessKey = secretOverride
	}
	u, _ := url.Parse(dev.ep.S3)
	c, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(creds.AccessKeyID, creds.SecretAccessKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func assertObjects(t *testing.T, c *minio.Client, bucket string, want map[string][32]byte) {
	t.Helper()
	ctx := context.Background()
	listed := map[string]bool{}
	for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "e2e/", Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list: %v", o.Err)
		}
		listed[o.Key] = true
	}
	for key, sum := range want {
		if !listed[key] {
			t.Errorf("%s not listed (got %v)", key, listed)
		}
		obj, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, obj)
		obj.Close()
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		if [32]byte(h.Sum(nil)) != sum {
			t.Errorf("%s: content differs from what was put", key)
		}
	}
}
