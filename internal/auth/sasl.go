package auth

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// ErrAuthFailed is the one error a failed SASL exchange returns, whatever
// failed (unknown user, wrong password, malformed message), so that a
// client learns nothing about which users exist.
var ErrAuthFailed = errors.New("authentication failed: invalid credentials")

// Session is the server side of one SASL exchange.
type Session interface {
	// Step consumes the client's next message and returns the reply to
	// send. done is true once the exchange succeeded; a non-nil error
	// (always wrapping ErrAuthFailed) ends it.
	Step(msg []byte) (reply []byte, done bool, err error)
	// User is the authenticated user name once done.
	User() string
}

// NewSession starts a SASL exchange for mech (PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512) against the store.
func (c *Credentials) NewSession(mech string) (Session, error) {
	switch mech {
	case Plain:
		return &plainSession{c: c}, nil
	case ScramSHA256, ScramSHA512:
		h, _ := hashOf(mech)
		return &scramSession{c: c, mech: mech, h: h}, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnsupportedMechanism, mech)
}

// Mechanisms are the SASL mechanisms NewSession serves.
var Mechanisms = []string{Plain, ScramSHA256, ScramSHA512}

// IsMechanism reports whether NewSession serves mech.
func IsMechanism(mech string) bool { return slices.Contains(Mechanisms, mech) }

// plainSession is RFC 4616: one message, authzid NUL authcid NUL passwd.
type plainSession struct {
	c    *Credentials
	user string
	used bool
}

func (p *plainSession) Step(msg []byte) ([]byte, bool, error) {
	if p.used {
		return nil, false, fmt.Errorf("%w (PLAIN takes one message)", ErrAuthFailed)
	}
	p.used = true
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return nil, false, fmt.Errorf("%w (malformed PLAIN message)", ErrAuthFailed)
	}
	authz, user, pw := string(parts[0]), string(parts[1]), string(parts[2])
	if authz != "" && authz != user {
		return nil, false, fmt.Errorf("%w (authorization id differs from the user)", ErrAuthFailed)
	}
	if !p.c.CheckPlain(user, pw) {
		return nil, false, ErrAuthFailed
	}
	p.user = user
	return []byte{}, true, nil
}

func (p *plainSession) User() string { return p.user }
