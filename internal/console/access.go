package console

// Login and access control.
//
// Login: when the broker has a SASL listener (and Config.Auth is not
// set), every route but /healthz, /readyz and /metrics asks for HTTP
// Basic authentication (realm "Sluice") and checks the user name and
// password against the broker's SASL/SCRAM credentials, the ones Kafka
// clients log in with (broker.CheckPassword). A wrong password is
// answered 401 after a delay that grows with each failure from the same
// address, counted together with the broker's failed SASL logins
// (broker.LoginFailed). Passwords are never logged. A successful check
// is remembered for loginCacheFor (keyed by a keyed hash of user and
// password, never the password), so that a page polling the API does
// not run the SCRAM key derivation on every request; a changed or
// deleted password therefore stops working in the console within that
// time. Basic authentication sends the password with every request:
// serve the console over TLS (a reverse proxy) when it is reachable
// beyond the host.
//
// Access: the console acts as the logged-in user, and with the broker's
// authorization on it shows and does only what that user's ACLs allow,
// checked with broker.Allowed against the user and the HTTP client's
// address, as Kafka checks the same request (without a login, as
// User:ANONYMOUS, like a client of a PLAINTEXT listener):
//
//	overview, cluster info, charts      a login (Kafka's Metadata gives any
//	                                     client the brokers); per-topic and
//	                                     per-group series as below
//	topics list, topic, partitions      DESCRIBE on the topic (others are left out)
//	topic configs (and retention,       DESCRIBE_CONFIGS on the topic (hidden otherwise)
//	cleanup policy in the list)
//	message browser                     READ on the topic
//	groups list, group                  DESCRIBE on the group; its offsets and lag
//	                                     (a share group's partitions) only for
//	                                     topics with DESCRIBE (a share
//	                                     partition's records in flight with it)
//	create topic                        CREATE on the cluster or on the topic
//	delete topic                        DELETE on the topic
//	reset group offsets                 READ on the group and on the topic
//
// A refused request is answered 403 with {"error": "user U may not OP
// RESOURCE"}; the check comes before the existence check, so a user
// cannot probe for names it may not see. The console's own Kafka
// client talks to the broker over broker.InternalConn, outside ACLs;
// these checks are what stands between a user and the data.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Login cache bounds.
const (
	loginCacheFor  = 30 * time.Second
	loginCacheSize = 1024
)

// basicLogin is the Authenticator used when the broker has SASL
// listeners: HTTP Basic authentication against the SASL credentials.
type basicLogin struct {
	s   *Server
	key [32]byte // HMAC key for the cache; random per process

	mu sync.Mutex                // guards ok
	ok map[[32]byte]loginSuccess // recent successful checks by HMAC(user, password)
}

type loginSuccess struct {
	user    string
	expires time.Time
}

func newBasicLogin(s *Server) *basicLogin {
	l := &basicLogin{s: s, ok: map[[32]byte]loginSuccess{}}
	rand.Read(l.key[:])
	return l
}

// authenticate implements Authenticator.
func (l *basicLogin) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	user, password, given := r.BasicAuth()
	if !given {
		unauthorized(w, "log in with a Sluice user name and password (the broker's SASL users)")
		return "", false
	}
	now := time.Now()
	mac := hmac.New(sha256.New, l.key[:])
	fmt.Fprintf(mac, "%d:%s:%s", len(user), user, password)
	var k [32]byte
	copy(k[:], mac.Sum(nil))
	l.mu.Lock()
	hit, cached := l.ok[k]
	l.mu.Unlock()
	if cached && now.Before(hit.expires) && hit.user == user {
		return user, true
	}
	if user == "" || !l.s.b.CheckPassword(user, password) {
		d := l.s.b.LoginFailed(clientHost(r))
		l.s.log.Info("console login failed", "user", user, "remote", r.RemoteAddr, "delay", d)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-l.s.stop:
		}
		t.Stop()
		unauthorized(w, "wrong user name or password")
		return "", false
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
	return user, true
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="Sluice"`)
	writeErr(w, http.StatusUnauthorized, msg)
}

// clientHost is the HTTP client's address without the port: the host
// ACLs and the failed-login delay are checked against.
func clientHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// aclUser is the user ACLs are checked for: the logged-in user, or
// ANONYMOUS without a login.
func aclUser(ctx context.Context) string {
	if u := User(ctx); u != "" {
		return u
	}
	return "ANONYMOUS"
}

// clusterName is the name of Kafka's cluster resource.
const clusterName = "kafka-cluster"

// may reports whether the request's user may perform op on a resource.
func (s *Server) may(r *http.Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return s.b.Allowed(aclUser(r.Context()), clientHost(r), op, rt, name)
}

// need is may as an error: a 403 naming what is missing.
func (s *Server) need(r *http.Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) error {
	if s.may(r, op, rt, name) {
		return nil
	}
	return forbidden(r, op, rt, name)
}

func forbidden(r *http.Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) error {
	what := strings.ToLower(rt.String())
	if rt == kmsg.ACLResourceTypeCluster {
		what = "the cluster"
	} else {
		what = fmt.Sprintf("%s %q", what, name)
	}
	return &apiError{http.StatusForbidden, fmt.Sprintf("user %s may not %s %s (ask an administrator for an ACL)", aclUser(r.Context()), op.String(), what)}
}

// seriesAllowed reports whether the request's user may see a chart
// series: per-topic series need DESCRIBE on the topic, group lag DESCRIBE
// on the group; broker-wide series need nothing more than a login.
func (s *Server) seriesAllowed(r *http.Request) func(name string) bool {
	return func(name string) bool {
		if rest, ok := strings.CutPrefix(name, pTopic); ok {
			topic, _, _ := strings.Cut(rest, "/")
			return s.may(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic)
		}
		if rest, ok := strings.CutPrefix(name, pGroupLag); ok {
			group := strings.TrimSuffix(rest, "/lag")
			return s.may(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, group)
		}
		return true
	}
}
