package schemaregistry

import (
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

// Login: with a SASL listener on the broker, every request needs HTTP
// Basic authentication with a user and password of the broker's SASL
// credential store (broker.CheckPassword). A wrong password is answered
// 401 (error_code 40101) after the delay the broker applies to a failed
// SASL login from the same address, counted together with those
// (broker.LoginFailed). A successful check is remembered for
// loginCacheFor under a keyed hash of user and password, so that a
// client's every request does not pay the SCRAM key derivation.
//
// Without SASL, a client certificate verified against the broker's
// client CA (--tls-client-ca, which then requires one, as on the broker's
// SSL listeners) names the user: its subject's common name, as the
// broker's SSL principal User:CN.
//
// Access: with the broker's authorization on, each request is checked
// against the broker's ACLs for the logged-in user (User:ANONYMOUS
// without SASL) and the client's address. A subject is the ACL
// resource of type TOPIC named "subject:" and the subject's name (a
// name no topic can have, since topic names may not contain ':'), so a
// prefixed ACL on "subject:orders-" covers every subject starting with
// "orders-". The operations:
//
//	list subjects, versions, subjects of an id   DESCRIBE on the subject (others left out)
//	get a version or schema, lookup,             READ on the subject (for an id: on any
//	compatibility check                          subject that uses it)
//	register                                     WRITE on the subject
//	delete a version or subject                  DELETE on the subject
//	get a subject's config or mode               DESCRIBE_CONFIGS on the subject
//	set or delete a subject's config or mode     ALTER_CONFIGS on the subject
//	global config and mode                       DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster
//
// A refused request is answered 403 with error_code 40301; the check
// comes before the existence check, so that a user cannot probe for
// subjects it may not see.

// SubjectACLPrefix starts the name of the TOPIC ACL resource that stands
// for a subject.
const SubjectACLPrefix = "subject:"

// clusterName is Kafka's cluster resource.
const clusterName = "kafka-cluster"

const (
	loginCacheFor  = 30 * time.Second
	loginCacheSize = 1024
)

type userKey struct{}

type basicLogin struct {
	reg *Registry
	key [32]byte // HMAC key of the cache; random per process

	mu sync.Mutex                // guards ok
	ok map[[32]byte]loginSuccess // recent successful checks by HMAC(user, password)
}

type loginSuccess struct {
	user    string
	expires time.Time
}

func newBasicLogin(reg *Registry) *basicLogin {
	l := &basicLogin{reg: reg, ok: map[[32]byte]loginSuccess{}}
	rand.Read(l.key[:])
	return l
}

func (l *basicLogin) authenticate(r *http.Request) (string, error) {
	user, password, given := r.BasicAuth()
	if !given {
		return "", errf(http.StatusUnauthorized, codeUnauthorized, "Unauthorized: log in with a Sluice user name and password (the broker's SASL users)")
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
		return user, nil
	}
	if user == "" || !l.reg.b.CheckPassword(user, password) {
		d := l.reg.b.LoginFailed(clientHost(r))
		l.reg.log.Info("schema registry login failed", "user", user, "remote", r.RemoteAddr, "delay", d)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-l.reg.stop:
		}
		t.Stop()
		return "", errf(http.StatusUnauthorized, codeUnauthorized, "Unauthorized: wrong user name or password")
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

// certUser is the user a verified client certificate names ("" when
// none was verified).
func certUser(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		return ""
	}
	sub := r.TLS.PeerCertificates[0].Subject
	if sub.CommonName != "" {
		return sub.CommonName
	}
	return sub.String()
}

func clientHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func aclUser(r *http.Request) string {
	if u, _ := r.Context().Value(userKey{}).(string); u != "" {
		return u
	}
	return "ANONYMOUS"
}

func (reg *Registry) aclOn() bool { return reg.b.AuthorizationEnabled() }

// may reports whether the request's user may perform op on subject.
func (reg *Registry) may(r *http.Request, op kmsg.ACLOperation, subject string) bool {
	return reg.b.Allowed(aclUser(r), clientHost(r), op, kmsg.ACLResourceTypeTopic, SubjectACLPrefix+subject)
}

func (reg *Registry) need(r *http.Request, op kmsg.ACLOperation, subject string) error {
	if reg.may(r, op, subject) {
		return nil
	}
	return reg.forbidden(r, op, fmt.Sprintf("subject %q", subject))
}

func (reg *Registry) needCluster(r *http.Request, op kmsg.ACLOperation) error {
	if reg.b.Allowed(aclUser(r), clientHost(r), op, kmsg.ACLResourceTypeCluster, clusterName) {
		return nil
	}
	return reg.forbidden(r, op, "the cluster (global config and mode)")
}

func (reg *Registry) forbidden(r *http.Request, op kmsg.ACLOperation, what string) error {
	return errf(http.StatusForbidden, codeForbidden, "User %s may not %s %s (ask an administrator for an ACL)",
		aclUser(r), strings.ToUpper(op.String()), what)
}
