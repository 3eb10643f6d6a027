package auth

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorizer decides requests by Kafka's ACL rules (those of its
// StandardAuthorizer):
//
//   - A superuser may do anything.
//   - The ACLs that apply are those whose resource type matches, whose
//     pattern covers the resource name (literal equal, the literal
//     wildcard "*", or a prefix), whose principal is the requester or
//     User:*, and whose host is the requester's address or "*".
//   - A DENY for the operation or for ALL wins over any ALLOW.
//   - An ALLOW for the operation or for ALL allows it; so does an ALLOW
//     for an operation that implies it: DESCRIBE is implied by READ,
//     WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS.
//   - Otherwise the request is denied, unless no ACL at all names the
//     resource and AllowIfNoACL is set (allow.everyone.if.no.acl.found).
type Authorizer struct {
	ACLs         *ACLs
	SuperUsers   []string // principals, such as "User:admin"
	AllowIfNoACL bool
}

// Authorize reports whether principal, connected from host, may perform
// op on the resource of type rt called name.
func (z *Authorizer) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if slices.Contains(z.SuperUsers, principal) {
		return true
	}
	allowed, resourceHasACL := false, false
	for _, a := range z.ACLs.snapshot() {
		if a.ResourceType != rt || !patternApplies(a, name) {
			continue
		}
		resourceHasACL = true
		if a.Principal != principal && a.Principal != "User:*" {
			continue
		}
		if a.Host != host && a.Host != "*" {
			continue
		}
		switch a.Permission {
		case kmsg.ACLPermissionTypeDeny:
			if a.Operation == op || a.Operation == kmsg.ACLOperationAll {
				return false
			}
		case kmsg.ACLPermissionTypeAllow:
			if a.Operation == op || a.Operation == kmsg.ACLOperationAll || implies(a.Operation, op) {
				allowed = true
			}
		}
	}
	if !resourceHasACL && z.AllowIfNoACL {
		return true
	}
	return allowed
}

// implies reports whether being allowed granted lets one do op.
func implies(granted, op kmsg.ACLOperation) bool {
	switch op {
	case kmsg.ACLOperationDescribe:
		switch granted {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}
