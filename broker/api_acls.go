package broker

// CreateAcls v0-3, DescribeAcls v0-3, DeleteAcls v0-3.
//
// Behaviour:
//   - Kafka's ACL model (see internal/auth): resource types topic, group,
//     cluster (named "kafka-cluster") and transactional id; literal and
//     prefixed patterns; principals User:NAME (User:* for everyone);
//     hosts (* for any). Bindings are stored in DATA/security/acls.json,
//     fsynced before the reply; a binding already stored is not stored
//     twice.
//   - Without authorization (no --authorization), all three answer
//     SECURITY_DISABLED, as Kafka does without an authorizer: ACLs that
//     nothing enforces are not stored.
//   - CreateAcls and DeleteAcls need ALTER on the cluster, DescribeAcls
//     DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
//   - An invalid binding or filter gets INVALID_REQUEST with a message;
//     filters follow Kafka's rules (ANY matches everything, MATCH with a
//     name selects the bindings that apply to that resource).
//   - v0 knows only literal patterns.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/auth"
)

func init() {
	register(kmsg.CreateACLs.Int16(), 0, 3, handleCreateACLs)
	register(kmsg.DescribeACLs.Int16(), 0, 3, handleDescribeACLs)
	register(kmsg.DeleteACLs.Int16(), 0, 3, handleDeleteACLs)
}

func strPtr(s string) *string { return &s }

// noAuthorizer is the message of SECURITY_DISABLED answers.
const noAuthorizer = "no authorizer is configured: start the broker with --authorization to use ACLs"

func handleCreateACLs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	allowed := r.allowedCluster(opAlter)
	for _, c := range req.Creations {
		if r.b.authz == nil {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = kerr.SecurityDisabled.Code, strPtr(noAuthorizer)
			resp.Results = append(resp.Results, res)
			continue
		}
		res := kmsg.NewCreateACLsResponseResult()
		pt := c.ResourcePatternType
		if req.Version == 0 {
			pt = kmsg.ACLResourcePatternTypeLiteral
		}
		a := auth.ACL{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: pt,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
		var err error
		if !allowed {
			err = errCode(kerr.ClusterAuthorizationFailed, "CreateAcls needs ALTER on the cluster")
		} else if verr := a.Validate(); verr != nil {
			err = errCode(kerr.InvalidRequest, "%v", verr)
		} else if serr := r.b.acls.Create(a); serr != nil {
			r.b.cfg.logger.Error("storing ACLs failed", "err", serr)
			err = errCode(kerr.UnknownServerError, "storing the ACL failed: %v", serr)
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = codeOf(err), strPtr(errMessage(err))
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func handleDescribeACLs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if r.b.authz == nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, strPtr(noAuthorizer)
		return resp, nil
	}
	if !r.allowedCluster(opDescribe) {
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, strPtr("DescribeAcls needs DESCRIBE on the cluster")
		return resp, nil
	}
	f := auth.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType}
	if req.Version == 0 {
		f.PatternType = kmsg.ACLResourcePatternTypeLiteral
	}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, strPtr(errMessage(err))
		return resp, nil
	}
	type key struct {
		rt   kmsg.ACLResourceType
		name string
		pt   kmsg.ACLResourcePatternType
	}
	index := map[key]int{}
	for _, a := range r.b.acls.Describe(f) {
		k := key{a.ResourceType, a.ResourceName, a.PatternType}
		i, ok := index[k]
		if !ok {
			i = len(resp.Resources)
			index[k] = i
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = k.rt, k.name, k.pt
			resp.Resources = append(resp.Resources, res)
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host, acl.Operation, acl.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, acl)
	}
	return resp, nil
}

func handleDeleteACLs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	fail := func(i int, code int16, msg string) {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, &msg
	}
	allowed := r.allowedCluster(opAlter)
	var filters []auth.Filter
	var at []int // index in resp.Results of each filter
	for i, rf := range req.Filters {
		f := auth.Filter{ResourceType: rf.ResourceType, ResourceName: rf.ResourceName, PatternType: rf.ResourcePatternType,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType}
		if req.Version == 0 {
			f.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		if r.b.authz == nil {
			fail(i, kerr.SecurityDisabled.Code, noAuthorizer)
			continue
		}
		if !allowed {
			fail(i, kerr.ClusterAuthorizationFailed.Code, "DeleteAcls needs ALTER on the cluster")
			continue
		}
		if err := f.Validate(); err != nil {
			fail(i, kerr.InvalidRequest.Code, err.Error())
			continue
		}
		filters, at = append(filters, f), append(at, i)
	}
	if len(filters) == 0 {
		return resp, nil
	}
	deleted, err := r.b.acls.Delete(filters...)
	for j, i := range at {
		if err != nil {
			r.b.cfg.logger.Error("deleting ACLs failed", "err", err)
			fail(i, kerr.UnknownServerError.Code, "deleting the ACLs failed: "+err.Error())
			continue
		}
		res := kmsg.NewDeleteACLsResponseResult()
		for _, a := range deleted[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
			res.MatchingACLs = append(res.MatchingACLs, m)
		}
		resp.Results[i] = res
	}
	return resp, nil
}
