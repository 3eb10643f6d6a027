package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/vfs"
)

// fakeClock is a clock a test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// tokenLogin runs a SCRAM-SHA-256 exchange with tokenauth=true for id and
// hmac, returning the authenticated user.
func tokenLogin(t *testing.T, c *Credentials, tokens *Tokens, id string, hmac []byte) (string, error) {
	t.Helper()
	s, err := c.NewSessionWithTokens(ScramSHA256, tokens)
	if err != nil {
		t.Fatal(err)
	}
	return scramExchange(t, s, id, base64.StdEncoding.EncodeToString(hmac), ",tokenauth=true")
}

// TestTokenLifetime: a token's expiry is its renew interval, cut at its
// maximum; renew and expire move it; a token past its expiry no longer
// logs in, and the store drops it at its next write; the file holds no
// HMAC and reopens to the same tokens.
func TestTokenLifetime(t *testing.T) {
	fsys := vfs.NewMem()
	clk := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := TokenConfig{MaxLifetime: 10 * time.Hour, RenewInterval: time.Hour}
	s, err := OpenTokens(fsys, "tokens.json", cfg, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	creds := &Credentials{users: map[string]map[string]Credential{}}
	tok, hmac, err := s.Create("User:alice", "User:alice", []string{"User:bob"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := clk.t.UnixMilli()
	if tok.IssueMs != now || tok.ExpiryMs != now+time.Hour.Milliseconds() || tok.MaxMs != now+10*time.Hour.Milliseconds() {
		t.Fatalf("token %+v", tok)
	}
	if user, err := tokenLogin(t, creds, s, tok.ID, hmac); err != nil || user != "alice" {
		t.Fatalf("login: %q, %v", user, err)
	}
	data, err := vfs.ReadFile(fsys, "tokens.json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), base64.StdEncoding.EncodeToString(hmac)) || strings.Contains(string(data), base64.RawStdEncoding.EncodeToString(hmac)) {
		t.Fatal("the token file holds the HMAC")
	}
	if _, err := s.Renew(hmac, "User:carol", -1); !errors.Is(err, ErrTokenOwnerMismatch) {
		t.Fatalf("renew by a stranger: %v", err)
	}
	clk.t = clk.t.Add(50 * time.Minute)
	exp, err := s.Renew(hmac, "User:bob", -1) // a renewer; the default interval
	if want := clk.t.Add(time.Hour).UnixMilli(); err != nil || exp != want {
		t.Fatalf("renew: %d, %v; want %d", exp, err, want)
	}
	exp, err = s.Renew(hmac, "User:alice", (20 * time.Hour).Milliseconds())
	if err != nil || exp != tok.MaxMs {
		t.Fatalf("renew past the max: %d, %v; want %d", exp, err, tok.MaxMs)
	}
	re, err := OpenTokens(fsys, "tokens.json", cfg, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	if l := re.List(); len(l) != 1 || l[0].ExpiryMs != tok.MaxMs {
		t.Fatalf("reopened: %+v", l)
	}
	if user, err := tokenLogin(t, creds, re, tok.ID, hmac); err != nil || user != "alice" {
		t.Fatalf("login after reopen: %q, %v", user, err)
	}
	// Past its expiry: no login, renew says expired, List leaves it out.
	clk.t = time.UnixMilli(tok.MaxMs + 1)
	if _, err := tokenLogin(t, creds, re, tok.ID, hmac); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("login after expiry: %v", err)
	}
	if _, err := re.Renew(hmac, "User:alice", -1); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("renew after expiry: %v", err)
	}
	if l := re.List(); len(l) != 0 {
		t.Fatalf("listed after expiry: %+v", l)
	}
	// The next write drops it from the file.
	if _, _, err := re.Create("User:bob", "User:bob", nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := re.Renew(hmac, "User:alice", -1); !errors.Is(err, ErrTokenNotFound) {
		t.Fatalf("renew after the drop: %v", err)
	}
	// Expire with a negative period ends a token at once.
	_, h2, err := re.Create("User:dave", "User:dave", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := re.Expire(h2, "User:dave", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := re.Expire(h2, "User:dave", -1); !errors.Is(err, ErrTokenNotFound) {
		t.Fatalf("expire twice: %v", err)
	}
}

// TestTokenAuthWithoutStore: tokenauth is refused where no token store
// is given.
func TestTokenAuthWithoutStore(t *testing.T) {
	creds := &Credentials{users: map[string]map[string]Credential{}}
	s, _ := creds.NewSession(ScramSHA256)
	if _, err := scramExchange(t, s, "id", "pw", ",tokenauth=true"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("tokenauth without a store: %v", err)
	}
}

// scramExchange runs a SCRAM-SHA-256 client against s for user and pw,
// with ext appended to the client-first message (RFC 5802 extensions),
// and returns the user the session authenticated.
func scramExchange(t *testing.T, s Session, user, pw, ext string) (string, error) {
	t.Helper()
	bare := "n=" + user + ",r=clientnonce" + ext
	reply, _, err := s.Step([]byte("n,," + bare))
	if err != nil {
		return "", err
	}
	first := string(reply)
	var nonce, salt string
	iters := 0
	for _, a := range strings.Split(first, ",") {
		switch {
		case strings.HasPrefix(a, "r="):
			nonce = a[2:]
		case strings.HasPrefix(a, "s="):
			salt = a[2:]
		case strings.HasPrefix(a, "i="):
			fmt.Sscan(a[2:], &iters)
		}
	}
	saltB, err := base64.StdEncoding.DecodeString(salt)
	if err != nil {
		t.Fatalf("server-first %q: %v", first, err)
	}
	salted, err := saltPassword(sha256.New, pw, saltB, iters)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	final := "c=" + base64.StdEncoding.EncodeToString([]byte("n,,")) + ",r=" + nonce
	sig := mac(stored[:], bare+","+first+","+final)
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	reply, done, err := s.Step([]byte(final + ",p=" + base64.StdEncoding.EncodeToString(proof)))
	if err != nil {
		return "", err
	}
	if !done || string(reply) != "v="+base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), bare+","+first+","+final)) {
		t.Fatalf("server-final %q, done %v", reply, done)
	}
	return s.User(), nil
}
