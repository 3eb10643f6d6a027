package broker

// DescribeUserScramCredentials v0 and AlterUserScramCredentials v0.
//
// Behaviour:
//   - Credentials live in DATA/security/credentials.json (see
//     internal/auth): salt, iterations, StoredKey and ServerKey per user
//     and mechanism; an upsertion's salted password is turned into those
//     keys and never stored. The store is fsynced before the reply.
//   - Describe needs DESCRIBE on the cluster, Alter needs ALTER on the
//     cluster (else CLUSTER_AUTHORIZATION_FAILED).
//   - Describe with no users lists every user; a named user without
//     credentials gets RESOURCE_NOT_FOUND, a name given twice
//     DUPLICATE_RESOURCE.
//   - Alter: mechanism 1 is SCRAM-SHA-256, 2 SCRAM-SHA-512 (else
//     UNSUPPORTED_SASL_MECHANISM); iterations 4096-16384 and a non-empty
//     salt, salted password and name (else UNACCEPTABLE_CREDENTIAL); a
//     user named in two operations on one mechanism gets
//     DUPLICATE_RESOURCE; deleting a missing credential
//     RESOURCE_NOT_FOUND. One result per user; its first error wins.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/auth"
)

func init() {
	register(kmsg.DescribeUserSCRAMCredentials.Int16(), 0, 0, handleDescribeUserSCRAM)
	register(kmsg.AlterUserSCRAMCredentials.Int16(), 0, 0, handleAlterUserSCRAM)
}

// scramMechs maps Kafka's ScramMechanism codes to names.
var scramMechs = map[int8]string{1: auth.ScramSHA256, 2: auth.ScramSHA512}

func scramCode(mech string) int8 {
	for c, m := range scramMechs {
		if m == mech {
			return c
		}
	}
	return 0
}

func handleDescribeUserSCRAM(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !r.allowedCluster(opDescribe) {
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, strPtr("DescribeUserScramCredentials needs DESCRIBE on the cluster")
		return resp, nil
	}
	result := func(ui auth.UserInfo) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = ui.Name
		for _, m := range ui.Mechanisms {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = scramCode(m.Mechanism), int32(m.Iterations)
			res.CredentialInfos = append(res.CredentialInfos, ci)
		}
		return res
	}
	if len(req.Users) == 0 {
		for _, ui := range r.b.creds.Describe() {
			resp.Results = append(resp.Results, result(ui))
		}
		return resp, nil
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	for _, u := range req.Users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u.Name
		if count[u.Name] > 1 {
			res.ErrorCode, res.ErrorMessage = kerr.DuplicateResource.Code, strPtr("user "+u.Name+" is named more than once")
		} else if uis := r.b.creds.Describe(u.Name); len(uis) == 1 {
			res = result(uis[0])
		} else {
			res.ErrorCode, res.ErrorMessage = kerr.ResourceNotFound.Code, strPtr("user "+u.Name+" has no SCRAM credentials")
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func handleAlterUserSCRAM(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var users []string
	errs := map[string]error{}
	seen := map[[2]string]int{}
	note := func(user string, mech int8) {
		if _, ok := errs[user]; !ok {
			users = append(users, user)
			errs[user] = nil
		}
		seen[[2]string{user, scramMechs[mech]}]++
	}
	for _, d := range req.Deletions {
		note(d.Name, d.Mechanism)
	}
	for _, u := range req.Upsertions {
		note(u.Name, u.Mechanism)
	}
	setErr := func(user string, err error) {
		if errs[user] == nil {
			errs[user] = err
		}
	}
	allowed := r.allowedCluster(opAlter)
	check := func(user string, mech int8) bool {
		switch {
		case !allowed:
			setErr(user, errCode(kerr.ClusterAuthorizationFailed, "AlterUserScramCredentials needs ALTER on the cluster"))
		case user == "":
			setErr(user, errCode(kerr.UnacceptableCredential, "empty user name"))
		case scramMechs[mech] == "":
			setErr(user, errCode(kerr.UnsupportedSaslMechanism, "SCRAM mechanism %d: want 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)", mech))
		case seen[[2]string{user, scramMechs[mech]}] > 1:
			setErr(user, errCode(kerr.DuplicateResource, "user %q has more than one operation on %s", user, scramMechs[mech]))
		default:
			return errs[user] == nil
		}
		return false
	}
	for _, d := range req.Deletions {
		if !check(d.Name, d.Mechanism) {
			continue
		}
		if err := r.b.creds.Delete(d.Name, scramMechs[d.Mechanism]); err != nil {
			if errors.Is(err, auth.ErrNoCredential) {
				setErr(d.Name, errCode(kerr.ResourceNotFound, "%v", err))
			} else {
				setErr(d.Name, errCode(kerr.UnknownServerError, "%v", err))
			}
		}
	}
	for _, u := range req.Upsertions {
		if !check(u.Name, u.Mechanism) {
			continue
		}
		if err := r.b.creds.SetSalted(u.Name, scramMechs[u.Mechanism], int(u.Iterations), u.Salt, u.SaltedPassword); err != nil {
			if errors.Is(err, auth.ErrBadCredential) {
				setErr(u.Name, errCode(kerr.UnacceptableCredential, "%v", err))
			} else {
				setErr(u.Name, errCode(kerr.UnknownServerError, "%v", err))
			}
		}
	}
	for _, u := range users {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = u
		if err := errs[u]; err != nil {
			res.ErrorCode, res.ErrorMessage = codeOf(err), strPtr(errMessage(err))
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
