package schemaregistry

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/httpserve"
)

// Login: with a SASL listener on the broker, every request needs HTTP
// Basic authentication with a user and password of the broker's SASL
// credential store (broker.CheckPassword). A wrong password is answered
// 401 (error_code 40101) after the delay the broker applies to a failed
// SASL login from the same address, counted together with those
// (broker.LoginFailed). A successful check is remembered for
// 30 s under a keyed hash of user and password, so that a client's
// every request does not pay the SCRAM key derivation
// (httpserve.BasicLogin).
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

type userKey struct{}

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

func aclUser(r *http.Request) string {
	if u, _ := r.Context().Value(userKey{}).(string); u != "" {
		return u
	}
	return "ANONYMOUS"
}

func (reg *Registry) aclOn() bool { return reg.b.AuthorizationEnabled() }

// may reports whether the request's user may perform op on subject.
func (reg *Registry) may(r *http.Request, op kmsg.ACLOperation, subject string) bool {
	return reg.b.Allowed(aclUser(r), httpserve.ClientHost(r), op, kmsg.ACLResourceTypeTopic, SubjectACLPrefix+subject)
}

func (reg *Registry) need(r *http.Request, op kmsg.ACLOperation, subject string) error {
	if reg.may(r, op, subject) {
		return nil
	}
	return reg.forbidden(r, op, fmt.Sprintf("subject %q", subject))
}

func (reg *Registry) needCluster(r *http.Request, op kmsg.ACLOperation) error {
	if reg.b.Allowed(aclUser(r), httpserve.ClientHost(r), op, kmsg.ACLResourceTypeCluster, clusterName) {
		return nil
	}
	return reg.forbidden(r, op, "the cluster (global config and mode)")
}

func (reg *Registry) forbidden(r *http.Request, op kmsg.ACLOperation, what string) error {
	return errf(http.StatusForbidden, codeForbidden, "User %s may not %s %s (ask an administrator for an ACL)",
		aclUser(r), strings.ToUpper(op.String()), what)
}
