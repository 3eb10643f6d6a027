package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"hash"
	"strings"
)

// scramSession is the server side of RFC 5802 (client-first,
// server-first, client-final, server-final) for SCRAM-SHA-256/512, as
// Kafka's ScramSaslServer runs it: no channel binding, the extension
// tokenauth=true logging in with a delegation token (tokens.go; refused
// when the session has no token store), and the client's
// final nonce accepted when it ends with the nonce the server sent
// (librdkafka repeats its own nonce in front of it).
type scramSession struct {
	c    *Credentials
	mech string
	h    func() hash.Hash

	step      int
	user      string
	cred      Credential
	gs2       string // the client's GS2 header, as sent
	firstBare string // client-first-message-bare
	first     string // server-first-message
	nonce     string // the full nonce the server sent

	tokens *Tokens // delegation tokens a tokenauth login checks; nil: refused
	token  bool    // the login is with a delegation token
}

// TokenAuthenticated reports whether the session logged in with a
// delegation token (its User is then the token's owner).
func (s *scramSession) TokenAuthenticated() bool { return s.token }

func (s *scramSession) User() string { return s.user }

func (s *scramSession) Step(msg []byte) ([]byte, bool, error) {
	s.step++
	switch s.step {
	case 1:
		reply, err := s.clientFirst(string(msg))
		return reply, false, err
	case 2:
		reply, err := s.clientFinal(string(msg))
		return reply, err == nil, err
	}
	return nil, false, fmt.Errorf("%w (SCRAM exchange already finished)", ErrAuthFailed)
}

func (s *scramSession) clientFirst(m string) ([]byte, error) {
	bad := func(why string) ([]byte, error) { return nil, fmt.Errorf("%w (%s)", ErrAuthFailed, why) }
	// gs2-header: cbind-flag "," [authzid] ","
	parts := strings.SplitN(m, ",", 3)
	if len(parts) != 3 {
		return bad("malformed SCRAM client-first message")
	}
	switch {
	case parts[0] == "n", parts[0] == "y":
	default:
		return bad("channel binding is not supported")
	}
	authz := ""
	if parts[1] != "" {
		if !strings.HasPrefix(parts[1], "a=") {
			return bad("malformed SCRAM authorization id")
		}
		authz = decodeSaslName(parts[1][2:])
	}
	s.gs2 = parts[0] + "," + parts[1] + ","
	s.firstBare = parts[2]
	attrs := strings.Split(s.firstBare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return bad("SCRAM client-first message lacks n= and r=")
	}
	user, nonce := decodeSaslName(attrs[0][2:]), attrs[1][2:]
	if user == "" || nonce == "" || strings.ContainsAny(nonce, ",") {
		return bad("empty SCRAM user or nonce")
	}
	for _, ext := range attrs[2:] {
		if strings.HasPrefix(ext, "tokenauth=") {
			if ext != "tokenauth=true" {
				return bad("malformed tokenauth extension")
			}
			if s.tokens == nil {
				return bad("delegation tokens are not enabled")
			}
			s.token = true
			continue
		}
		if strings.HasPrefix(ext, "m=") {
			return bad("mandatory SCRAM extension not supported")
		}
	}
	if authz != "" && authz != user {
		return bad("authorization id differs from the user")
	}
	var cred Credential
	var ok bool
	if s.token {
		var owner string
		cred, owner, ok = s.tokens.credential(user, s.mech)
		user = strings.TrimPrefix(owner, "User:")
	} else {
		cred, ok = s.c.lookup(user, s.mech)
	}
	if !ok {
		return nil, ErrAuthFailed
	}
	var r [24]byte
	rand.Read(r[:])
	s.user, s.cred = user, cred
	s.nonce = nonce + base64.RawURLEncoding.EncodeToString(r[:])
	s.first = fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, base64.StdEncoding.EncodeToString(cred.Salt), cred.Iterations)
	return []byte(s.first), nil
}

func (s *scramSession) clientFinal(m string) ([]byte, error) {
	bad := func(why string) ([]byte, error) { return nil, fmt.Errorf("%w (%s)", ErrAuthFailed, why) }
	i := strings.LastIndex(m, ",p=")
	if i < 0 {
		return bad("SCRAM client-final message lacks a proof")
	}
	withoutProof := m[:i]
	proof, err := base64.StdEncoding.DecodeString(m[i+3:])
	if err != nil {
		return bad("SCRAM proof is not base64")
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return bad("SCRAM client-final message lacks c= and r=")
	}
	cb, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || string(cb) != s.gs2 {
		return bad("SCRAM channel binding does not match the GS2 header")
	}
	if !strings.HasSuffix(attrs[1][2:], s.nonce) {
		return bad("SCRAM nonce does not match")
	}
	authMsg := []byte(s.firstBare + "," + s.first + "," + withoutProof)
	mac := hmac.New(s.h, s.cred.StoredKey)
	mac.Write(authMsg)
	sig := mac.Sum(nil)
	if len(proof) != len(sig) {
		return nil, ErrAuthFailed
	}
	clientKey := make([]byte, len(sig))
	for k := range sig {
		clientKey[k] = proof[k] ^ sig[k]
	}
	d := s.h()
	d.Write(clientKey)
	if !hmac.Equal(d.Sum(nil), s.cred.StoredKey) {
		return nil, ErrAuthFailed
	}
	mac = hmac.New(s.h, s.cred.ServerKey)
	mac.Write(authMsg)
	return []byte("v=" + base64.StdEncoding.EncodeToString(mac.Sum(nil))), nil
}

// decodeSaslName undoes RFC 5802's escaping of "," and "=" in names.
func decodeSaslName(s string) string {
	return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(s)
}
