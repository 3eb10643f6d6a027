package broker

// The delegation-token APIs (KIP-48), over the token store of
// internal/auth (tokens.go):
//
//	CreateDelegationToken v1-3   RenewDelegationToken v1-2
//	ExpireDelegationToken v1-2   DescribeDelegationToken v1-3
//
// Behaviour (as Kafka's):
//   - A token acts as its owner: a SCRAM login (SCRAM-SHA-256 or -512)
//     with the token id as user name, the HMAC in base64 as password and
//     the extension tokenauth=true authenticates as the owner.
//   - None of the four is allowed on a connection that authenticated
//     with a token, nor on one without an authenticated principal
//     (PLAINTEXT, or SSL without a client certificate):
//     DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.
//   - Create: the owner is the requester unless v3 names another, which
//     needs CREATE_TOKENS on that user (else
//     DELEGATION_TOKEN_AUTHORIZATION_FAILED). Owner and renewers must be
//     of principal type User (else INVALID_PRINCIPAL_TYPE). The maximum
//     lifetime is MaxLifetimeMillis cut to 7 days (7 days when <= 0); the
//     token expires after 24 hours unless renewed, never past its
//     maximum.
//   - Renew and Expire name the token by HMAC (unknown:
//     DELEGATION_TOKEN_NOT_FOUND), must come from its owner, requester or
//     a renewer (else DELEGATION_TOKEN_OWNER_MISMATCH), and fail on an
//     expired token (DELEGATION_TOKEN_EXPIRED). Renew sets the expiry to
//     now + RenewTimeMillis (24 hours when negative); Expire to now +
//     ExpiryPeriodMillis, or ends the token at once when negative. Both
//     stop at the maximum lifetime.
//   - Describe: Owners null lists every token, empty none, else the
//     tokens each owner owns, requested or renews; only tokens the
//     principal owns, requested or renews, or may DESCRIBE (as a
//     delegation token) or DESCRIBE_TOKENS (on the owner) are listed.
//     The HMAC is empty: Sluice keeps only a hash of it (as it keeps only
//     SCRAM keys of passwords), so it is shown once, at creation.
//   - Tokens are persisted under the data directory; an expired token
//     stops authenticating at once and is dropped from the store.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/auth"
)

func init() {
	register(kmsg.CreateDelegationToken.Int16(), 1, 3, handleCreateDelegationToken)
	register(kmsg.RenewDelegationToken.Int16(), 1, 2, handleRenewDelegationToken)
	register(kmsg.ExpireDelegationToken.Int16(), 1, 2, handleExpireDelegationToken)
	register(kmsg.DescribeDelegationToken.Int16(), 1, 3, handleDescribeDelegationToken)
}

const (
	resDelegationToken = kmsg.ACLResourceTypeDelegationToken
	resUser            = kmsg.ACLResourceTypeUser
	opCreateTokens     = kmsg.ACLOperationCreateTokens
	opDescribeTokens   = kmsg.ACLOperationDescribeTokens
)

// tokenRequestsAllowed is Kafka's rule for the token APIs: an
// authenticated principal, not itself logged in with a token.
func (r *request) tokenRequestsAllowed() bool {
	return r.b.tokens != nil && !r.c.tokenAuthed && r.principal != auth.Anonymous && r.principal != ""
}

// splitPrincipal splits "User:alice" into its type and name.
func splitPrincipal(p string) (string, string) {
	typ, name, ok := strings.Cut(p, ":")
	if !ok {
		return "User", p
	}
	return typ, name
}

// tokenCode is the Kafka error code of a token store error.
func tokenCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, auth.ErrTokenNotFound):
		return kerr.DelegationTokenNotFound.Code
	case errors.Is(err, auth.ErrTokenOwnerMismatch):
		return kerr.DelegationTokenOwnerMismatch.Code
	case errors.Is(err, auth.ErrTokenExpired):
		return kerr.DelegationTokenExpired.Code
	}
	return kerr.KafkaStorageError.Code
}

func handleCreateDelegationToken(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreateDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = -1, -1, -1
	owner := r.principal
	if req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "" {
		typ := "User"
		if req.OwnerPrincipalType != nil {
			typ = *req.OwnerPrincipalType
		}
		if typ != "User" {
			resp.ErrorCode = kerr.InvalidPrincipalType.Code
			return resp, nil
		}
		owner = "User:" + *req.OwnerPrincipalName
	}
	resp.PrincipalType, resp.PrincipalName = splitPrincipal(owner)
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = splitPrincipal(r.principal)
	if !r.tokenRequestsAllowed() {
		resp.ErrorCode = kerr.DelegationTokenRequestNotAllowed.Code
		return resp, nil
	}
	if owner != r.principal && !r.allowed(opCreateTokens, resUser, owner) {
		resp.ErrorCode = kerr.DelegationTokenAuthorizationFailed.Code
		return resp, nil
	}
	var renewers []string
	for _, rn := range req.Renewers {
		if rn.PrincipalType != "User" {
			resp.ErrorCode = kerr.InvalidPrincipalType.Code
			return resp, nil
		}
		renewers = append(renewers, rn.PrincipalType+":"+rn.PrincipalName)
	}
	tok, hmac, err := r.b.tokens.Create(owner, r.principal, renewers, req.MaxLifetimeMillis)
	if err != nil {
		r.b.cfg.logger.Error("create delegation token", "err", err)
		resp.ErrorCode = kerr.KafkaStorageError.Code
		return resp, nil
	}
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = tok.IssueMs, tok.ExpiryMs, tok.MaxMs
	resp.TokenID, resp.HMAC = tok.ID, hmac
	r.b.cfg.logger.Info("delegation token created", "token", tok.ID, "owner", tok.Owner, "requester", tok.Requester)
	return resp, nil
}

func handleRenewDelegationToken(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.RenewDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	resp.ExpiryTimestamp = -1
	if !r.tokenRequestsAllowed() {
		resp.ErrorCode = kerr.DelegationTokenRequestNotAllowed.Code
		return resp, nil
	}
	exp, err := r.b.tokens.Renew(req.HMAC, r.principal, req.RenewTimeMillis)
	if resp.ErrorCode = tokenCode(err); err == nil {
		resp.ExpiryTimestamp = exp
	}
	return resp, nil
}

func handleExpireDelegationToken(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ExpireDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	resp.ExpiryTimestamp = -1
	if !r.tokenRequestsAllowed() {
		resp.ErrorCode = kerr.DelegationTokenRequestNotAllowed.Code
		return resp, nil
	}
	exp, err := r.b.tokens.Expire(req.HMAC, r.principal, req.ExpiryPeriodMillis)
	if resp.ErrorCode = tokenCode(err); err == nil {
		resp.ExpiryTimestamp = exp
	}
	return resp, nil
}

func handleDescribeDelegationToken(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.DescribeDelegationTokenResponse)
	if !r.tokenRequestsAllowed() {
		resp.ErrorCode = kerr.DelegationTokenRequestNotAllowed.Code
		return resp, nil
	}
	if req.Owners != nil && len(req.Owners) == 0 {
		return resp, nil
	}
	for _, t := range r.b.tokens.List() {
		if req.Owners != nil {
			match := false
			for _, o := range req.Owners {
				if t.OwnerOrRenewer(o.PrincipalType + ":" + o.PrincipalName) {
					match = true
					break
				}
			}
			if !match {
				continue
			}
		}
		if !t.OwnerOrRenewer(r.principal) && !r.allowed(opDescribe, resDelegationToken, t.ID) && !r.allowed(opDescribeTokens, resUser, t.Owner) {
			continue
		}
		d := kmsg.NewDescribeDelegationTokenResponseTokenDetail()
		d.PrincipalType, d.PrincipalName = splitPrincipal(t.Owner)
		d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName = splitPrincipal(t.Requester)
		d.IssueTimestamp, d.ExpiryTimestamp, d.MaxTimestamp = t.IssueMs, t.ExpiryMs, t.MaxMs
		d.TokenID, d.HMAC = t.ID, []byte{}
		for _, rn := range t.Renewers {
			typ, name := splitPrincipal(rn)
			d.Renewers = append(d.Renewers, kmsg.DescribeDelegationTokenResponseTokenDetailRenewer{PrincipalType: typ, PrincipalName: name})
		}
		resp.TokenDetails = append(resp.TokenDetails, d)
	}
	return resp, nil
}

// openTokens opens the delegation-token store in the security directory
// dir, through the broker's filesystem.
func (b *Broker) openTokens(dir string) (*auth.Tokens, error) {
	if err := b.fs.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	t, err := auth.OpenTokens(b.fs, b.layout.DelegationTokensFile(), auth.TokenConfig{}, nil)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	return t, nil
}
