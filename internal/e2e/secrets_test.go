package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
)

// agentSecretsOf reads the secrets file dev's local provisioner wrote for
// node: the join token and S3 keys its agent holds.
func agentSecretsOf(t *testing.T, dev *devProc, node string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dev.dir, "agents", node, "agent.yaml"))
	if err != nil {
		t.Fatalf("agent secrets of %s: %v", node, err)
	}
	var s map[string]string
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s["join_token"] == "" || s["s3_secret_access_key"] == "" {
		t.Fatalf("agent secrets of %s lack the join token or S3 keys: %v", node, keys(s))
	}
	return s
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// runJobOutput runs a shell script as a job on cluster and returns what it
// printed.
func runJobOutput(t *testing.T, dev *devProc, cluster, script string) string {
	t.Helper()
	var job struct {
		WorkflowID string `json:"workflow_id"`
	}
	body := map[string]any{"command": []string{"sh", "-c", script}, "cpus": 0.5}
	if code, _, raw := dev.call("POST", "/v1/clusters/"+cluster+"/jobs", dev.admin, body, &job); code != http.StatusCreated {
		t.Fatalf("submit job: %d %s", code, raw)
	}
	var j jobView
	waitFor(t, func() bool { j = getJob(t, dev, job.WorkflowID); return j.Status != "running" })
	if j.Result == nil {
		t.Fatalf("job %s: %s %s", job.WorkflowID, j.Status, j.Error)
	}
	return j.Result.Output
}

// agentS3Limited: the S3 keys an agent's host holds read no cluster's join
// token and cannot replace the policy bundle or a plugin.
func agentS3Limited(t *testing.T, dev *devProc, secrets map[string]string) {
	t.Helper()
	ctx := context.Background()
	u, _ := url.Parse(dev.ep.S3)
	agent, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(secrets["s3_access_key_id"], secrets["s3_secret_access_key"], "")})
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for o := range s3Client(t, dev, "").ListObjects(ctx, dev.ep.Bucket, minio.ListObjectsOptions{Prefix: "secrets/join/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		tokens = append(tokens, o.Key)
	}
	if len(tokens) == 0 {
		t.Fatal("no join token in the bucket: the check below checks nothing")
	}
	for _, k := range tokens {
		if _, err := agent.StatObject(ctx, dev.ep.Bucket, k, minio.StatObjectOptions{}); err == nil {
			t.Errorf("the agent's S3 keys read %s", k)
		}
	}
	for _, k := range []string{"policies/current.json", "plugins/modules/evil"} {
		if _, err := agent.PutObject(ctx, dev.ep.Bucket, k, strings.NewReader("{}"), 2, minio.PutObjectOptions{}); err == nil {
			t.Errorf("the agent's S3 keys wrote %s", k)
		}
	}
}

// TestJobsCannotReadAgentSecrets is the /proc attack of docs/security.md:
// a job reads its agent's environment (/proc/$PPID/environ) and, on a node
// with a job_user, the agent's secrets file and the admin token too. The
// agent holds its join token and S3 keys in a 0600 file, never in its
// environment, and a job_user job cannot open that file at all. The S3 keys
// it holds are the gateway's agent account, not root: they read no join
// token and write no policy or plugin. Then every
// workflow history dev holds is read: none contains a join token, the S3
// keys or the admin token.
func TestJobsCannotReadAgentSecrets(t *testing.T) {
	t.Parallel()
	dev := sharedDev(t)
	sharedCluster(t, dev, "sec-proc", `
name: sec-proc
defaults: {provider: local, provisioner: {kind: local}}
nodes: [{name: proc-a}]
`)
	secrets := agentSecretsOf(t, dev, "proc-a")
	var root struct {
		SecretAccessKey string `json:"secret_access_key"`
	}
	if b, err := os.ReadFile(dev.ep.S3Credentials); err != nil || json.Unmarshal(b, &root) != nil || root.SecretAccessKey == "" {
		t.Fatalf("dev's S3 root keys: %v", err)
	}
	forbidden := map[string]string{
		"the join token": secrets["join_token"], "the agent's S3 secret key": secrets["s3_secret_access_key"],
		"the S3 root secret key": root.SecretAccessKey, "the admin token": dev.admin}
	if secrets["s3_secret_access_key"] == root.SecretAccessKey {
		t.Fatal("the agent holds the S3 root keys")
	}
	agentS3Limited(t, dev, secrets)
	leaks := func(where, out string) {
		t.Helper()
		for what, s := range forbidden {
			if strings.Contains(out, s) {
				t.Errorf("%s shows %s", where, what)
			}
		}
	}
	out := runJobOutput(t, dev, "sec-proc", `tr '\0' '\n' < /proc/$PPID/environ`)
	if !strings.Contains(out, "TRAINYARD_AGENT_DIR=") {
		t.Fatalf("the job did not read its agent's environment (the test checks nothing): %q", out)
	}
	leaks("a job reading /proc/$PPID/environ", out)

	if os.Geteuid() == 0 {
		// As root (CI, and any shared lab's agents), a job_user keeps jobs
		// out of the agent's files and /proc entries.
		sharedCluster(t, dev, "sec-jobuser", `
name: sec-jobuser
defaults: {provider: local, provisioner: {kind: local}}
nodes: [{name: proc-b, job_user: nobody}]
`)
		forbidden["node proc-b's join token"] = agentSecretsOf(t, dev, "proc-b")["join_token"]
		out := runJobOutput(t, dev, "sec-jobuser", "id -u; tr '\\0' '\\n' < /proc/$PPID/environ; cat "+
			filepath.Join(dev.dir, "agents", "proc-b", "agent.yaml")+" "+dev.ep.AdminTokenFile+"; true")
		if first, _, _ := strings.Cut(out, "\n"); first == "0" {
			t.Fatalf("the job_user job ran as root: %q", out)
		}
		leaks("a job_user job reading the agent's environment, secrets file and the admin token", out)
	} else {
		t.Log("not root: job_user not tried")
	}

	// Every history on dev, including other tests' clusters, jobs and runs.
	tc, err := client.Dial(client.Options{HostPort: dev.ep.Temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	histories := 0
	var next []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", PageSize: 200, NextPageToken: next})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			id, runID := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
			it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			var raw bytes.Buffer
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatalf("history of %s: %v", id, err)
				}
				b, _ := proto.Marshal(ev) // payloads' bytes appear as they are
				raw.Write(b)
			}
			histories++
			leaks("the history of "+id, raw.String())
		}
		if next = resp.GetNextPageToken(); len(next) == 0 {
			break
		}
	}
	if histories < 3 {
		t.Fatalf("read %d histories: the scan checked nothing", histories)
	}
	t.Logf("%d histories read, none holds a secret", histories)
}
