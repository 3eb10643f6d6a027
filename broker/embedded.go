package broker

// The broker's API for tools embedded in the same process (the web
// console): what security is on, password checks, ACL decisions, and
// an in-process Kafka connection.

import (
	"errors"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// InternalPrincipal is the principal of connections from InternalConn.
// Its type is not User, so no SASL login or certificate can claim it;
// ACLs never apply to it.
const InternalPrincipal = "Internal:sluice"

// SASLEnabled reports whether any listener requires SASL
// (SASL_PLAINTEXT or SASL_SSL).
func (b *Broker) SASLEnabled() bool {
	for _, l := range b.cfg.listeners {
		if l.sasl() {
			return true
		}
	}
	return false
}

// AuthorizationEnabled reports whether requests are checked against ACLs
// (Authorization(true)).
func (b *Broker) AuthorizationEnabled() bool { return b.authz != nil }

// CheckPassword reports whether password is user's SASL/SCRAM password
// (the one SCRAM and PLAIN logins check).
func (b *Broker) CheckPassword(user, password string) bool {
	return b.creds.CheckPlain(user, password)
}

// LoginFailed records a failed login from host (an IP address) and
// returns how long to hold the answer back: the delay the broker's SASL
// path applies, from the same per-address count, so that trying
// passwords through another front door is no faster.
func (b *Broker) LoginFailed(host string) time.Duration {
	return b.fails.failed(host, time.Now(), b.cfg.authFailBase)
}

// Allowed reports whether User:user, connected from host, may perform op
// on the resource of type rt called name, as the broker decides a Kafka
// request: always true with authorization off; superusers may do
// anything; otherwise the ACLs decide (Kafka's ACL semantics: an ALLOW binding grants, a DENY binding wins).
// The cluster resource is named "kafka-cluster".
func (b *Broker) Allowed(user, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	return b.authz.Authorize("User:"+user, host, op, rt, name)
}

// InternalConn returns a Kafka connection to the broker served in
// process over net.Pipe, as the broker itself (InternalPrincipal):
// whatever the listeners' security, it needs no TLS and no SASL, and
// ACLs do not apply to it. It is meant for a tool in the same process
// that enforces its own users' rights (the console, through Allowed);
// use it with kgo.Dialer. The broker serves it like any connection
// (advertising its first listener's address) and closes it on Close;
// it does not count against MaxConnections.
func (b *Broker) InternalConn() (net.Conn, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing.Load() {
		return nil, errors.New("broker: closed")
	}
	if len(b.lns) == 0 {
		return nil, errors.New("broker: not started")
	}
	l := &listener{Listener: Listener{Protocol: "INTERNAL"}, addr: "internal", adv: b.lns[0].adv}
	server, client := net.Pipe()
	c := newConn(b, server, l)
	c.principal, c.internal = InternalPrincipal, true
	b.conns[c] = struct{}{}
	b.connCount.Add(1)
	b.wg.Add(1)
	b.metrics.conns.Inc()
	go c.serve()
	return client, nil
}
