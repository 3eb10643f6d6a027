package auth

import (
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/vfs"
)

// Delegation tokens (KIP-48). A token is an id and an HMAC (a random
// secret handed to the client once, at creation); a client logs in with
// SCRAM using the id as the user name, the HMAC in base64 as the
// password and the extension tokenauth=true, and acts as the token's
// owner.
//
// Like passwords, HMACs are never stored: the store keeps, per token, the
// SHA-512 of its HMAC (to find the token a renew or expire names) and the
// SCRAM credentials derived from it for both mechanisms. So, unlike
// Kafka, DescribeDelegationToken cannot show an HMAC again.

// TokenIterations is the SCRAM iteration count of a token's credentials
// (Kafka uses the mechanism's minimum, 4096).
const TokenIterations = MinIterations

// Errors of the token store, each a Kafka error of the same name.
var (
	ErrTokenNotFound      = errors.New("delegation token not found")
	ErrTokenOwnerMismatch = errors.New("the principal is neither the token's owner nor one of its renewers")
	ErrTokenExpired       = errors.New("delegation token has expired")
)

// Token is one delegation token, without its secret.
type Token struct {
	ID        string   `json:"id"`
	Owner     string   `json:"owner"`     // the principal the token acts as, e.g. "User:alice"
	Requester string   `json:"requester"` // the principal that created it
	Renewers  []string `json:"renewers,omitempty"`
	IssueMs   int64    `json:"issue_ms"`
	ExpiryMs  int64    `json:"expiry_ms"`
	MaxMs     int64    `json:"max_ms"`
}

// OwnerOrRenewer reports whether principal may renew, expire and see t.
func (t Token) OwnerOrRenewer(principal string) bool {
	return t.Owner == principal || t.Requester == principal || slices.Contains(t.Renewers, principal)
}

// storedToken is a token as persisted.
type storedToken struct {
	Token
	HMACHash string                `json:"hmac_sha512"` // hex
	Creds    map[string]Credential `json:"scram"`       // mechanism -> credential
}

// TokenConfig is the lifetime policy, Kafka's
// delegation.token.max.lifetime.ms and delegation.token.expiry.time.ms.
type TokenConfig struct {
	MaxLifetime   time.Duration // default 7 days
	RenewInterval time.Duration // default 24 hours
}

// Tokens is the delegation-token store, persisted in one JSON file
// (written with vfs.WriteFileAtomic). Expired tokens stop working at
// once and are dropped from the file at its next write. It is safe for
// concurrent use.
type Tokens struct {
	fs   vfs.FS
	path string
	cfg  TokenConfig
	now  func() time.Time

	mu     sync.Mutex              // guards tokens and serializes file writes
	tokens map[string]*storedToken // by id
}

// OpenTokens loads (or starts empty) the store at path. now is the clock
// (time.Now when nil).
func OpenTokens(fsys vfs.FS, path string, cfg TokenConfig, now func() time.Time) (*Tokens, error) {
	if cfg.MaxLifetime <= 0 {
		cfg.MaxLifetime = 7 * 24 * time.Hour
	}
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = 24 * time.Hour
	}
	if now == nil {
		now = time.Now
	}
	s := &Tokens{fs: fsys, path: path, cfg: cfg, now: now, tokens: map[string]*storedToken{}}
	data, err := vfs.ReadFile(fsys, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("auth: read tokens: %w", err)
	}
	var list []*storedToken
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("auth: read tokens: %w", err)
	}
	for _, t := range list {
		if t.ID == "" || t.HMACHash == "" || len(t.Creds) == 0 {
			return nil, fmt.Errorf("auth: read tokens: a token lacks its id, hash or credentials")
		}
		s.tokens[t.ID] = t
	}
	return s, nil
}

func (s *Tokens) nowMs() int64 { return s.now().UnixMilli() }

// writeLocked persists the live tokens, dropping expired ones. s.mu is held.
func (s *Tokens) writeLocked() error {
	now := s.nowMs()
	list := make([]*storedToken, 0, len(s.tokens))
	for id, t := range s.tokens {
		if t.ExpiryMs < now {
			delete(s.tokens, id)
			continue
		}
		list = append(list, t)
	}
	slices.SortFunc(list, func(a, b *storedToken) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return fmt.Errorf("auth: encode tokens: %w", err)
	}
	if err := vfs.WriteFileAtomic(s.fs, s.path, append(data, '\n')); err != nil {
		return fmt.Errorf("auth: write tokens: %w", err)
	}
	return nil
}

func hmacHash(hmac []byte) string {
	sum := sha512.Sum512(hmac)
	return hex.EncodeToString(sum[:])
}

// Create issues a token for owner, created by requester. maxLifetimeMs
// <= 0 takes the configured maximum; a larger one is cut to it. It
// returns the token and its HMAC, which is never available again.
func (s *Tokens) Create(owner, requester string, renewers []string, maxLifetimeMs int64) (Token, []byte, error) {
	var idb [16]byte
	rand.Read(idb[:])
	hmac := make([]byte, 64)
	rand.Read(hmac)
	pw := base64.StdEncoding.EncodeToString(hmac)
	creds := map[string]Credential{}
	for _, mech := range ScramMechanisms {
		h, _ := hashOf(mech)
		salt := make([]byte, 32)
		rand.Read(salt)
		salted, err := saltPassword(h, pw, salt, TokenIterations)
		if err != nil {
			return Token{}, nil, fmt.Errorf("auth: token credential: %w", err)
		}
		creds[mech] = newCredential(h, TokenIterations, salt, salted)
	}
	now := s.nowMs()
	life := s.cfg.MaxLifetime.Milliseconds()
	if maxLifetimeMs > 0 {
		life = min(life, maxLifetimeMs)
	}
	t := Token{
		ID:        base64.RawURLEncoding.EncodeToString(idb[:]),
		Owner:     owner,
		Requester: requester,
		Renewers:  slices.Clone(renewers),
		IssueMs:   now,
		MaxMs:     now + life,
	}
	t.ExpiryMs = min(t.MaxMs, now+s.cfg.RenewInterval.Milliseconds())
	st := &storedToken{Token: t, HMACHash: hmacHash(hmac), Creds: creds}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[t.ID] = st
	if err := s.writeLocked(); err != nil {
		delete(s.tokens, t.ID)
		return Token{}, nil, err
	}
	return t, hmac, nil
}

// byHMACLocked finds the token whose HMAC is hmac. s.mu is held.
func (s *Tokens) byHMACLocked(hmac []byte) *storedToken {
	h := hmacHash(hmac)
	for _, t := range s.tokens {
		if t.HMACHash == h {
			return t
		}
	}
	return nil
}

// Renew moves the expiry of the token with this HMAC to now + periodMs
// (the renew interval when negative), never past its maximum, and
// returns the new expiry.
func (s *Tokens) Renew(hmac []byte, principal string, periodMs int64) (int64, error) {
	if periodMs < 0 {
		periodMs = s.cfg.RenewInterval.Milliseconds()
	}
	return s.change(hmac, principal, func(t *storedToken, now int64) bool {
		t.ExpiryMs = min(t.MaxMs, now+periodMs)
		return false
	})
}

// Expire moves the expiry of the token with this HMAC to now + periodMs
// (never past its maximum); a negative period removes the token at once.
// It returns the new expiry.
func (s *Tokens) Expire(hmac []byte, principal string, periodMs int64) (int64, error) {
	return s.change(hmac, principal, func(t *storedToken, now int64) bool {
		if periodMs < 0 {
			t.ExpiryMs = now
			return true
		}
		t.ExpiryMs = min(t.MaxMs, now+periodMs)
		return false
	})
}

// change applies fn to the live token with this HMAC, which principal
// must own or renew; fn returns true to delete it.
func (s *Tokens) change(hmac []byte, principal string, fn func(*storedToken, int64) bool) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.byHMACLocked(hmac)
	if t == nil {
		return 0, ErrTokenNotFound
	}
	if !t.OwnerOrRenewer(principal) {
		return 0, ErrTokenOwnerMismatch
	}
	now := s.nowMs()
	if t.MaxMs < now || t.ExpiryMs < now {
		return 0, ErrTokenExpired
	}
	old := *t
	if fn(t, now) {
		delete(s.tokens, t.ID)
	}
	if err := s.writeLocked(); err != nil {
		*t = old
		s.tokens[t.ID] = t
		return 0, err
	}
	return t.ExpiryMs, nil
}

// List returns the live tokens, by id.
func (s *Tokens) List() []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowMs()
	var out []Token
	for _, t := range s.tokens {
		if t.ExpiryMs >= now {
			tt := t.Token
			tt.Renewers = slices.Clone(t.Renewers)
			out = append(out, tt)
		}
	}
	slices.SortFunc(out, func(a, b Token) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// credential returns the SCRAM credential of the live token id for mech
// and the token's owner.
func (s *Tokens) credential(id, mech string) (Credential, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[id]
	if !ok || t.ExpiryMs < s.nowMs() {
		return Credential{}, "", false
	}
	c, ok := t.Creds[mech]
	return c, t.Owner, ok
}

// NewSessionWithTokens is NewSession for a SCRAM login that may present
// a delegation token from tokens (the tokenauth extension).
func (c *Credentials) NewSessionWithTokens(mech string, tokens *Tokens) (Session, error) {
	s, err := c.NewSession(mech)
	if ss, ok := s.(*scramSession); ok {
		ss.tokens = tokens
	}
	return s, err
}
