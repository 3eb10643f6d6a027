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
// is remembered for 30 s (httpserve.BasicLogin; keyed by a keyed hash of
// user and password, never the password), so that a page polling the
// API does not run the SCRAM key derivation on every request; a changed
// or deleted password therefore stops working in the console within
// that time. Basic authentication sends the password with every
// request: serve the console over TLS (a reverse proxy) when it is
// reachable beyond the host.
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
	"fmt"
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/httpserve"
)

// basicLogin is the Authenticator used when the broker has SASL
// listeners: HTTP Basic authentication against the SASL credentials.
func basicLogin(l *httpserve.BasicLogin) Authenticator {
	return func(w http.ResponseWriter, r *http.Request) (string, bool) {
		user, err := l.Check(r)
		if err != nil {
			unauthorized(w, err.Error())
			return "", false
		}
		return user, true
	}
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="Sluice"`)
	writeErr(w, http.StatusUnauthorized, msg)
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
	return s.b.Allowed(aclUser(r.Context()), httpserve.ClientHost(r), op, rt, name)
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
