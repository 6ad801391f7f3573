// Package auth holds API bearer tokens and their roles. Tokens are random,
// shown once at creation and stored only as SHA-256 hashes: they carry 256
// bits of entropy, so a fast hash is enough and keeps checks cheap.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trainyard/trainyard/internal/atomicfile"
)

// Role grants a set of rights; each role includes the ones below it.
type Role string

const (
	Viewer   Role = "viewer"   // reads everything
	Operator Role = "operator" // submits and cancels work, uploads plugins
	Admin    Role = "admin"    // changes policies, clusters and tokens
)

var rank = map[Role]int{Viewer: 1, Operator: 2, Admin: 3}

// ParseRole validates a role name.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if _, ok := rank[r]; !ok {
		return "", fmt.Errorf("unknown role %q (want viewer, operator or admin)", s)
	}
	return r, nil
}

// Allows reports whether a holder of r may use something that needs min.
func (r Role) Allows(min Role) bool { return rank[r] >= rank[min] && rank[r] > 0 }

// Token is a stored token: never the secret itself.
type Token struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      Role      `json:"role"`
	Hash      string    `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
}

// ErrUnknownToken is returned for a token that is not in the store.
var ErrUnknownToken = errors.New("unknown or revoked token")

// Store keeps tokens in a JSON file, rewritten atomically on change.
// Several `server` replicas may share the file: each one reads it again
// when another replaced it, so a token created or revoked through one
// replica holds at every replica from its next request.
type Store struct {
	mu     sync.Mutex
	file   string
	tokens []Token
	info   os.FileInfo // of the file as last read or written; nil: none
}

// Open loads the store at file; a missing file is an empty store.
func Open(file string) (*Store, error) {
	s := &Store{file: file}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load reads the file again when it is not the one last read or written
// (another process renamed a new one into place). The caller holds s.mu.
func (s *Store) load() error {
	info, err := os.Stat(s.file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.tokens, s.info = nil, nil
		return nil
	case err != nil:
		return fmt.Errorf("open token store: %w", err)
	case s.info != nil && os.SameFile(s.info, info) && s.info.ModTime().Equal(info.ModTime()) && s.info.Size() == info.Size():
		return nil
	}
	b, err := os.ReadFile(s.file)
	if err != nil {
		return fmt.Errorf("open token store: %w", err)
	}
	var tokens []Token
	if err := json.Unmarshal(b, &tokens); err != nil {
		return fmt.Errorf("open token store %s: %w", s.file, err)
	}
	s.tokens, s.info = tokens, info
	return nil
}

// Create makes a new token and returns its secret, which is not kept.
func (s *Store) Create(name string, role Role) (secret string, tok Token, err error) {
	if _, err := ParseRole(string(role)); err != nil {
		return "", Token{}, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	secret = "ty_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw))
	idRaw := make([]byte, 6)
	_, _ = rand.Read(idRaw)
	tok = Token{ID: hex.EncodeToString(idRaw), Name: name, Role: role, Hash: hash(secret), CreatedAt: time.Now().UTC()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return "", Token{}, err
	}
	next := append(slices.Clone(s.tokens), tok)
	if err := s.save(next); err != nil {
		return "", Token{}, err
	}
	s.tokens = next
	return secret, tok, nil
}

// Authenticate finds the token whose hash matches secret.
func (s *Store) Authenticate(secret string) (Token, error) {
	h := hash(secret)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return Token{}, err
	}
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(h)) == 1 {
			return t, nil
		}
	}
	return Token{}, ErrUnknownToken
}

// List returns all tokens (hashes included; callers strip them for display).
func (s *Store) List() []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.load() // on error: the tokens as last read
	return slices.Clone(s.tokens)
}

// Revoke deletes the token with the given id.
func (s *Store) Revoke(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return err
	}
	i := slices.IndexFunc(s.tokens, func(t Token) bool { return t.ID == id })
	if i < 0 {
		return fmt.Errorf("revoke token %s: %w", id, ErrUnknownToken)
	}
	next := slices.Delete(slices.Clone(s.tokens), i, i+1)
	if err := s.save(next); err != nil {
		return err
	}
	s.tokens = next
	return nil
}

// Len is the number of tokens.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.load()
	return len(s.tokens)
}

func (s *Store) save(tokens []Token) error {
	b, err := json.MarshalIndent(tokens, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.file, b, 0o600); err != nil {
		return fmt.Errorf("save token store: %w", err)
	}
	// What this process wrote needs no reading back.
	if info, err := os.Stat(s.file); err == nil {
		s.info = info
	}
	return nil
}

func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
