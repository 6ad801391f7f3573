package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/trainyard/trainyard/internal/joinkey"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// agentSecrets is the agent's secrets file (mode 0600): what must not be in
// its environment, where every process it starts could read it. Provisioned
// agents find theirs at $TRAINYARD_AGENT_CONFIG; static ones name it with
// --secrets-file.
type agentSecrets struct {
	JoinToken         string `json:"join_token,omitempty" yaml:"join_token"`
	S3AccessKeyID     string `json:"s3_access_key_id,omitempty" yaml:"s3_access_key_id"`
	S3SecretAccessKey string `json:"s3_secret_access_key,omitempty" yaml:"s3_secret_access_key"`
}

// loadAgentSecrets reads path (empty: $TRAINYARD_AGENT_CONFIG, else none)
// and refuses a file others may read. A join token in the environment
// (TRAINYARD_JOIN_SECRET, the older static-agent way) is taken when the
// file has none.
func loadAgentSecrets(path string) (agentSecrets, error) {
	var s agentSecrets
	if path == "" {
		path = os.Getenv(provision.EnvAgentConfig)
	}
	if path != "" {
		fi, err := os.Stat(path)
		if err != nil {
			return s, fmt.Errorf("secrets file: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return s, fmt.Errorf("secrets file %s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return s, fmt.Errorf("secrets file: %w", err)
		}
		d := yaml.NewDecoder(bytes.NewReader(b))
		d.KnownFields(true)
		if err := d.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
			return s, fmt.Errorf("secrets file %s: %w", path, err)
		}
	}
	if s.JoinToken == "" {
		s.JoinToken = os.Getenv("TRAINYARD_JOIN_SECRET")
	}
	return s, nil
}

// sign fills hb's proof of the join token: a signature over a fresh
// sequence number, or the legacy secret as it is for clusters started
// before join tokens.
func (s agentSecrets) sign(hb *cluster.Heartbeat, seq int64) {
	if t, err := joinkey.Parse(s.JoinToken); err == nil {
		hb.Seq, hb.Sig, hb.Secret = seq, t.Sign(hb.Node, hb.AgentID, seq), ""
		return
	}
	hb.Secret = s.JoinToken
}
