package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"path/filepath"
	"slices"
	"sync"

	"github.com/sluicedb/sluice/internal/vfs"
)

// SASL mechanisms.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Iteration bounds of a SCRAM credential, as Kafka enforces them, and the
// count used when a password is set here.
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = 8192
)

// ScramMechanisms lists the SCRAM mechanisms a credential can be stored for.
var ScramMechanisms = []string{ScramSHA256, ScramSHA512}

// Errors of the credential store.
var (
	ErrUnsupportedMechanism = errors.New("unsupported SASL mechanism")
	ErrNoCredential         = errors.New("no such credential")
	ErrBadCredential        = errors.New("unacceptable credential")
)

func hashOf(mech string) (func() hash.Hash, error) {
	switch mech {
	case ScramSHA256:
		return sha256.New, nil
	case ScramSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("%w %q (want %s or %s)", ErrUnsupportedMechanism, mech, ScramSHA256, ScramSHA512)
}

// Credential is what is stored for one user and mechanism (RFC 5802's
// StoredKey and ServerKey, with the salt and iteration count).
type Credential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// newCredential derives the stored keys from a salted password.
func newCredential(h func() hash.Hash, iterations int, salt, salted []byte) Credential {
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	d := h()
	d.Write(clientKey)
	return Credential{
		Salt:       slices.Clone(salt),
		Iterations: iterations,
		StoredKey:  d.Sum(nil),
		ServerKey:  mac(salted, "Server Key"),
	}
}

// saltPassword is SCRAM's Hi(password, salt, i): PBKDF2 with HMAC over
// the mechanism's hash and an output as long as the hash. The password's
// UTF-8 bytes are used as they are, as Kafka does.
func saltPassword(h func() hash.Hash, password string, salt []byte, iterations int) ([]byte, error) {
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// MechanismInfo describes one stored credential without its secrets.
type MechanismInfo struct {
	Mechanism  string
	Iterations int
}

// UserInfo lists a user's mechanisms.
type UserInfo struct {
	Name       string
	Mechanisms []MechanismInfo
}

// Credentials is the credential store: SCRAM credentials per user and
// mechanism, persisted in credentials.json. It is safe for concurrent use.
type Credentials struct {
	fs   vfs.FS
	path string

	mu    sync.RWMutex                     // guards users and serializes file writes
	users map[string]map[string]Credential // user -> mechanism -> credential
}

// OpenCredentials loads (or starts empty) the store in dir on fsys; dir
// must exist.
func OpenCredentials(fsys vfs.FS, dir string) (*Credentials, error) {
	c := &Credentials{fs: fsys, path: filepath.Join(dir, "credentials.json"), users: map[string]map[string]Credential{}}
	if err := readJSON(fsys, c.path, &c.users); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	for u, ms := range c.users {
		for m, cr := range ms {
			if _, err := hashOf(m); err != nil || cr.Iterations < 1 || len(cr.StoredKey) == 0 {
				return nil, fmt.Errorf("auth: credentials.json: bad credential for user %q mechanism %q", u, m)
			}
		}
	}
	return c, nil
}

// Empty reports whether no credential exists.
func (c *Credentials) Empty() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.users) == 0
}

// SetPassword stores a credential for user and mech from a password, with
// a fresh random salt; iterations 0 means DefaultIterations.
func (c *Credentials) SetPassword(user, mech, password string, iterations int) error {
	if iterations == 0 {
		iterations = DefaultIterations
	}
	h, err := hashOf(mech)
	if err != nil {
		return err
	}
	if err := checkIterations(iterations); err != nil {
		return err
	}
	if password == "" {
		return fmt.Errorf("%w: empty password", ErrBadCredential)
	}
	salt := make([]byte, 32)
	rand.Read(salt)
	salted, err := saltPassword(h, password, salt, iterations)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadCredential, err)
	}
	return c.SetSalted(user, mech, iterations, salt, salted)
}

func checkIterations(n int) error {
	if n < MinIterations || n > MaxIterations {
		return fmt.Errorf("%w: %d iterations; want %d to %d", ErrBadCredential, n, MinIterations, MaxIterations)
	}
	return nil
}

// SetSalted stores a credential from a salt and salted password (what
// AlterUserScramCredentials carries), replacing any for user and mech.
// It returns once the store is fsynced.
func (c *Credentials) SetSalted(user, mech string, iterations int, salt, salted []byte) error {
	h, err := hashOf(mech)
	if err != nil {
		return err
	}
	if user == "" {
		return fmt.Errorf("%w: empty user name", ErrBadCredential)
	}
	if err := checkIterations(iterations); err != nil {
		return err
	}
	if len(salt) == 0 || len(salted) == 0 {
		return fmt.Errorf("%w: empty salt or salted password", ErrBadCredential)
	}
	cr := newCredential(h, iterations, salt, salted)
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.users[user]
	next := map[string]Credential{}
	for m, v := range old {
		next[m] = v
	}
	next[mech] = cr
	c.users[user] = next
	if err := writeJSON(c.fs, c.path, c.users); err != nil {
		if had {
			c.users[user] = old
		} else {
			delete(c.users, user)
		}
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}

// Delete removes user's credential for mech; ErrNoCredential if none.
func (c *Credentials) Delete(user, mech string) error {
	if _, err := hashOf(mech); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.users[user]
	if _, has := old[mech]; !ok || !has {
		return fmt.Errorf("%w: user %q has no %s credential", ErrNoCredential, user, mech)
	}
	next := map[string]Credential{}
	for m, v := range old {
		if m != mech {
			next[m] = v
		}
	}
	if len(next) == 0 {
		delete(c.users, user)
	} else {
		c.users[user] = next
	}
	if err := writeJSON(c.fs, c.path, c.users); err != nil {
		c.users[user] = old
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}

// Describe lists users and their mechanisms, sorted by name; with names,
// only those (a name without credentials is left out).
func (c *Credentials) Describe(names ...string) []UserInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(names) == 0 {
		for u := range c.users {
			names = append(names, u)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var out []UserInfo
	for _, u := range names {
		ms, ok := c.users[u]
		if !ok {
			continue
		}
		ui := UserInfo{Name: u}
		for _, m := range ScramMechanisms {
			if cr, ok := ms[m]; ok {
				ui.Mechanisms = append(ui.Mechanisms, MechanismInfo{Mechanism: m, Iterations: cr.Iterations})
			}
		}
		out = append(out, ui)
	}
	return out
}

func (c *Credentials) lookup(user, mech string) (Credential, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cr, ok := c.users[user][mech]
	return cr, ok
}

// CheckPlain reports whether password is user's: it is salted with the
// salt and iterations of the user's SCRAM credential (SHA-512 first) and
// the derived StoredKey compared in constant time.
func (c *Credentials) CheckPlain(user, password string) bool {
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		cr, ok := c.lookup(user, mech)
		if !ok {
			continue
		}
		h, _ := hashOf(mech)
		salted, err := saltPassword(h, password, cr.Salt, cr.Iterations)
		if err != nil {
			return false
		}
		got := newCredential(h, cr.Iterations, cr.Salt, salted)
		return hmac.Equal(got.StoredKey, cr.StoredKey)
	}
	return false
}
