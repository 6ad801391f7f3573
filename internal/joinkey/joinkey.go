// Package joinkey is a cluster's join credential. The token an agent holds
// is an Ed25519 private key; the cluster workflow keeps only its public
// half and checks a signature on every heartbeat. Each heartbeat signs a
// sequence number that must grow, so nothing a workflow history holds (the
// public key, past signatures) lets its reader join a node or replay one.
package joinkey

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/objstore"
)

// prefix marks a token, so a legacy join secret (plain hex) is told apart.
const prefix = "tyjoin1."

// Token is the private half: whoever holds it can join the cluster's nodes.
type Token struct{ key ed25519.PrivateKey }

// New makes a fresh token.
func New() (Token, error) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Token{}, fmt.Errorf("join token: %w", err)
	}
	return Token{key: k}, nil
}

// Parse reads a token written by String.
func Parse(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, prefix) {
		return Token{}, errors.New("join token: not a trainyard join token (tyjoin1.…)")
	}
	seed, err := base64.RawURLEncoding.DecodeString(s[len(prefix):])
	if err != nil || len(seed) != ed25519.SeedSize {
		return Token{}, errors.New("join token: malformed")
	}
	return Token{key: ed25519.NewKeyFromSeed(seed)}, nil
}

// String is the token as agents are given it.
func (t Token) String() string { return prefix + base64.RawURLEncoding.EncodeToString(t.key.Seed()) }

// Public is what the cluster workflow keeps.
func (t Token) Public() string { return hex.EncodeToString(t.key.Public().(ed25519.PublicKey)) }

// Sign signs one heartbeat of node from agent.
func (t Token) Sign(node, agent string, seq int64) string {
	return base64.RawStdEncoding.EncodeToString(ed25519.Sign(t.key, message(node, agent, seq)))
}

// ValidPublic says whether pub is a public half as Public writes it.
func ValidPublic(pub string) bool {
	k, err := hex.DecodeString(pub)
	return err == nil && len(k) == ed25519.PublicKeySize && pub == strings.ToLower(pub)
}

// Verify checks sig against the public key pub.
func Verify(pub, node, agent string, seq int64, sig string) bool {
	k, err := hex.DecodeString(pub)
	if err != nil || len(k) != ed25519.PublicKeySize {
		return false
	}
	s, err := base64.RawStdEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	return ed25519.Verify(ed25519.PublicKey(k), message(node, agent, seq), s)
}

// message binds a signature to one node, agent and sequence number; the
// NUL separators cannot occur in validated names.
func message(node, agent string, seq int64) []byte {
	return []byte("trainyard-heartbeat\x00" + node + "\x00" + agent + "\x00" + strconv.FormatInt(seq, 10))
}

// key is where the control plane keeps a cluster's token, named by its
// public half so a second `cluster up` never overwrites the one in force.
func key(cluster, pub string) string { return "secrets/join/" + cluster + "/" + pub }

// Save stores t for cluster in the bucket, where the control plane's
// workers (which start agents) find it by its public half.
func Save(ctx context.Context, s *objstore.Store, cluster string, t Token) error {
	tok := t.String()
	_, err := s.Client.PutObject(ctx, s.Bucket, key(cluster, t.Public()), strings.NewReader(tok), int64(len(tok)),
		minio.PutObjectOptions{ContentType: "text/plain"})
	if err != nil {
		return fmt.Errorf("save join token of %s: %w", cluster, err)
	}
	return nil
}

// Load finds the token of cluster whose public half is pub.
func Load(ctx context.Context, s *objstore.Store, cluster, pub string) (Token, error) {
	o, err := s.Client.GetObject(ctx, s.Bucket, key(cluster, pub), minio.GetObjectOptions{})
	if err != nil {
		return Token{}, fmt.Errorf("load join token of %s: %w", cluster, err)
	}
	defer o.Close()
	b, err := io.ReadAll(io.LimitReader(o, 1024))
	if err != nil {
		return Token{}, fmt.Errorf("load join token of %s: %w", cluster, err)
	}
	t, err := Parse(string(b))
	if err != nil {
		return Token{}, fmt.Errorf("load join token of %s: %w", cluster, err)
	}
	if t.Public() != pub {
		return Token{}, fmt.Errorf("load join token of %s: stored token does not match its key", cluster)
	}
	return t, nil
}
