package broker

// SaslHandshake v0-1 and SaslAuthenticate v0-2.
//
// Behaviour:
//   - On a SASL_PLAINTEXT or SASL_SSL listener a connection may send only
//     ApiVersions, SaslHandshake and SaslAuthenticate until its SASL
//     exchange succeeds; anything else closes it.
//   - SaslHandshake picks the mechanism (PLAIN, SCRAM-SHA-256,
//     SCRAM-SHA-512, as enabled); an unknown one gets
//     UNSUPPORTED_SASL_MECHANISM with the enabled list, and the
//     connection is closed. After a v0 handshake the client's next frames
//     are bare SASL tokens, answered with bare tokens (Kafka's pre-KIP-152
//     framing); after v1 they are SaslAuthenticate requests.
//   - A failed exchange (unknown user, wrong password, malformed
//     message) gets SASL_AUTHENTICATION_FAILED (a v0 bare exchange gets
//     nothing) after a delay that grows with each failure from the same
//     address (100 ms doubling to 5 s, forgotten after 10 minutes), then
//     the connection is closed. Messages never say which part failed.
//   - Either request on a listener without SASL, a second handshake, or
//     SaslAuthenticate before a handshake get ILLEGAL_SASL_STATE (closed
//     on a SASL listener).
//   - SessionLifetimeMillis is 0: sessions do not expire and clients do
//     not re-authenticate (KIP-368 is not served).
//   - The SASL bytes are never logged.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.SASLHandshake.Int16(), 0, 1, handleSaslHandshake)
	register(kmsg.SASLAuthenticate.Int16(), 0, 2, handleSaslAuthenticate)
}

// errAuthFailed closes a connection whose authentication failed.
var errAuthFailed = errors.New("SASL")

// admit refuses a request the connection may not send yet.
func (c *conn) admit(key int16) error {
	if c.lis.sasl() && !c.authed {
		switch kmsg.Key(key) {
		case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		default:
			return fmt.Errorf("%s before SASL authentication on a %s listener", kmsg.NameForKey(key), c.lis.Protocol)
		}
	}
	if c.b.authz != nil {
		if _, ok := apiACLs[key]; !ok {
			// Safety net: an API without a declared rule is never
			// served with authorization on (see authz.go).
			return fmt.Errorf("%s has no authorization rule", kmsg.NameForKey(key))
		}
	}
	return nil
}

func handleSaslHandshake(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	c := r.c
	resp.SupportedMechanisms = c.b.cfg.saslMechs
	switch {
	case !c.lis.sasl():
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case c.authed || c.sasl != nil:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		r.closeAfter = fmt.Errorf("%w: a second SaslHandshake", errAuthFailed)
	case !slices.Contains(c.b.cfg.saslMechs, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		r.closeAfter = fmt.Errorf("%w: unsupported SASL mechanism %q", errAuthFailed, req.Mechanism)
	default:
		s, err := c.b.creds.NewSessionWithTokens(req.Mechanism, c.b.tokens)
		if err != nil {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			r.closeAfter = fmt.Errorf("%w: %w", errAuthFailed, err)
			break
		}
		c.sasl, c.saslRaw = s, req.Version == 0
	}
	return resp, nil
}

func handleSaslAuthenticate(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := r.c
	if !c.lis.sasl() || c.authed || c.sasl == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake, or after authentication"
		resp.ErrorMessage = &msg
		if c.lis.sasl() {
			r.closeAfter = fmt.Errorf("%w: %s", errAuthFailed, msg)
		}
		return resp, nil
	}
	reply, done, err := c.sasl.Step(req.SASLAuthBytes)
	if err != nil {
		c.failAuth(r)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		r.closeAfter = fmt.Errorf("%w: %w", errAuthFailed, err)
		return resp, nil
	}
	resp.SASLAuthBytes = reply
	if done {
		c.authenticated()
	}
	return resp, nil
}

// authenticated ends a successful SASL exchange.
func (c *conn) authenticated() {
	c.authed, c.saslRaw = true, false
	c.principal = "User:" + c.sasl.User()
	if ts, ok := c.sasl.(interface{ TokenAuthenticated() bool }); ok {
		c.tokenAuthed = ts.TokenAuthenticated()
	}
	c.sasl = nil
	c.b.cfg.logger.Debug("authenticated", "remote", c.nc.RemoteAddr().String(), "principal", c.principal)
}

// failAuth waits the failed-authentication delay for the client's
// address (cut short when the broker closes).
func (c *conn) failAuth(r *request) {
	d := c.b.fails.failed(c.host, time.Now(), c.b.cfg.authFailBase)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.ctx.Done():
	}
}

// rawSASL serves one bare SASL token after a v0 SaslHandshake.
func (c *conn) rawSASL(p *pending, token []byte) error {
	p.name = "SaslAuthenticate"
	reply, done, err := c.sasl.Step(token)
	if err != nil {
		c.failAuth(&request{ctx: c.b.stopCtx})
		return fmt.Errorf("%w: %w", errAuthFailed, err)
	}
	p.resp = &rawReply{SASLAuthenticateResponse: kmsg.NewPtrSASLAuthenticateResponse(), data: reply}
	c.send(p)
	if done {
		c.authenticated()
	}
	return nil
}

// rawReply is a bare SASL token written as a size-prefixed frame with
// no response header (SaslHandshake v0 framing).
type rawReply struct {
	*kmsg.SASLAuthenticateResponse
	data []byte
}

func (rr *rawReply) write(c *conn) error {
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(rr.data)), uint32(len(rr.data)))
	buf = append(buf, rr.data...)
	if _, err := c.w.Write(buf); err != nil {
		return fmt.Errorf("write SASL token: %w", err)
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("write SASL token: %w", err)
	}
	return nil
}
