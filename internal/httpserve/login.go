package httpserve

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Login cache bounds.
const (
	loginCacheFor  = 30 * time.Second
	loginCacheSize = 1024
)

// Why a login failed, worded for the user who logs in.
var (
	ErrNoLogin       = errors.New("log in with a Sluice user name and password (the broker's SASL users)")
	ErrWrongPassword = errors.New("wrong user name or password")
)

// Passwords is what BasicLogin checks a login against: the broker's
// SASL credentials (broker.Broker has both methods).
type Passwords interface {
	// CheckPassword reports whether password is user's.
	CheckPassword(user, password string) bool
	// LoginFailed counts a failed login from host and returns how long
	// to delay the answer.
	LoginFailed(host string) time.Duration
}

// BasicLogin checks HTTP Basic credentials against Passwords. A wrong
// password is answered after the delay LoginFailed gives (counted with
// the broker's failed SASL logins from the same address). A successful
// check is remembered for loginCacheFor under a keyed hash of user and
// password (never the password), so that a client's every request does
// not pay the SCRAM key derivation; a changed or deleted password
// therefore keeps working for up to that long. Passwords are never
// logged.
type BasicLogin struct {
	pw   Passwords
	log  *slog.Logger
	what string          // starts the log line of a failed login
	stop <-chan struct{} // closed: failed-login delays end
	key  [32]byte        // HMAC key of the cache; random per process
	now  func() time.Time

	mu sync.Mutex                // guards ok
	ok map[[32]byte]loginSuccess // recent successful checks by HMAC(user, password)
}

type loginSuccess struct {
	user    string
	expires time.Time
}

// NewBasicLogin returns a BasicLogin that checks against pw and logs a
// failed login to log as "<what> login failed". Closing stop ends the
// delays of failed logins in progress.
func NewBasicLogin(pw Passwords, log *slog.Logger, what string, stop <-chan struct{}) *BasicLogin {
	l := &BasicLogin{pw: pw, log: log, what: what, stop: stop, now: time.Now, ok: map[[32]byte]loginSuccess{}}
	rand.Read(l.key[:])
	return l
}

// Check returns the user r logs in as. It fails with ErrNoLogin when r
// carries no Basic credentials, and with ErrWrongPassword, after the
// failed-login delay (cut short when r's context ends or stop closes),
// when they do not check.
func (l *BasicLogin) Check(r *http.Request) (string, error) {
	user, password, given := r.BasicAuth()
	if !given {
		return "", ErrNoLogin
	}
	now := l.now()
	mac := hmac.New(sha256.New, l.key[:])
	fmt.Fprintf(mac, "%d:%s:%s", len(user), user, password)
	var k [32]byte
	copy(k[:], mac.Sum(nil))
	l.mu.Lock()
	hit, cached := l.ok[k]
	l.mu.Unlock()
	if cached && now.Before(hit.expires) && hit.user == user {
		return user, nil
	}
	if user == "" || !l.pw.CheckPassword(user, password) {
		d := l.pw.LoginFailed(ClientHost(r))
		l.log.Info(l.what+" login failed", "user", user, "remote", r.RemoteAddr, "delay", d)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-l.stop:
		}
		t.Stop()
		return "", ErrWrongPassword
	}
	l.mu.Lock()
	if len(l.ok) >= loginCacheSize {
		for k, v := range l.ok {
			if !now.Before(v.expires) {
				delete(l.ok, k)
			}
		}
		if len(l.ok) >= loginCacheSize {
			clear(l.ok)
		}
	}
	l.ok[k] = loginSuccess{user: user, expires: now.Add(loginCacheFor)}
	l.mu.Unlock()
	return user, nil
}

// ClientHost is the HTTP client's address without the port: the host
// that ACLs and the failed-login delay are checked against.
func ClientHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
