package clientauth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateUser sets user's password for SCRAM-SHA-256 and SCRAM-SHA-512
// (or only the mechanisms given), replacing any old one, with
// AlterUserScramCredentials; the password is salted on the client
// (kadm) and never sent in clear.
func CreateUser(ctx context.Context, adm *kadm.Client, user, password string, iterations int32, mechanisms ...string) error {
	if user == "" || password == "" {
		return errors.New("a user name and a password are needed")
	}
	if iterations == 0 {
		iterations = 8192
	}
	if len(mechanisms) == 0 {
		mechanisms = []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}
	}
	var ups []kadm.UpsertSCRAM
	for _, m := range mechanisms {
		mech, err := scramMechanism(m)
		if err != nil {
			return err
		}
		ups = append(ups, kadm.UpsertSCRAM{User: user, Mechanism: mech, Iterations: iterations, Password: password})
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
	if err != nil {
		return err
	}
	return res.Error()
}

func scramMechanism(m string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(m) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", m)
}

// DeleteUser removes every SCRAM credential of user.
func DeleteUser(ctx context.Context, adm *kadm.Client, user string) error {
	desc, err := adm.DescribeUserSCRAMs(ctx, user)
	if err != nil {
		return err
	}
	d, ok := desc[user]
	if !ok || d.Err != nil {
		if ok {
			return fmt.Errorf("user %q: %w", user, d.Err)
		}
		return fmt.Errorf("user %q does not exist", user)
	}
	var dels []kadm.DeleteSCRAM
	for _, ci := range d.CredInfos {
		dels = append(dels, kadm.DeleteSCRAM{User: user, Mechanism: ci.Mechanism})
	}
	res, err := adm.AlterUserSCRAMs(ctx, dels, nil)
	if err != nil {
		return err
	}
	return res.Error()
}

// ACLSpec is an ACL request in rpk's terms: principals and hosts to allow
// or deny, operations, resources and the pattern type. For creating,
// every combination is created; for listing and deleting, it is a filter
// in which an empty field matches anything.
type ACLSpec struct {
	AllowPrincipals, AllowHosts []string
	DenyPrincipals, DenyHosts   []string
	Operations                  []string // read, write, create, delete, alter, describe, all, cluster_action, describe_configs, alter_configs, idempotent_write (any for filters)
	Topics, Groups, TxnIDs      []string
	Cluster                     bool
	PatternType                 string // literal or prefixed; also any and match for filters
}

func principal(p string) string {
	if !strings.Contains(p, ":") {
		return "User:" + p
	}
	return p
}

func principals(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = principal(p)
	}
	return out
}

// Builder turns the spec into a kadm builder, for creating (all
// combinations; principals, an operation and a resource are required) or
// for filtering.
func (s ACLSpec) Builder(create bool) (*kadm.ACLBuilder, error) {
	b := kadm.NewACLs()
	var ops []kadm.ACLOperation
	for _, o := range s.Operations {
		op, err := kmsg.ParseACLOperation(strings.ReplaceAll(strings.ToLower(o), "-", "_"))
		if err != nil || op == kmsg.ACLOperationUnknown {
			return nil, fmt.Errorf("operation %q: want read, write, create, delete, alter, describe, all, cluster_action, describe_configs, alter_configs or idempotent_write", o)
		}
		ops = append(ops, op)
	}
	pattern := strings.ToLower(s.PatternType)
	if pattern == "" {
		pattern = "literal"
		if !create {
			pattern = "any"
		}
	}
	pt, err := kmsg.ParseACLResourcePatternType(pattern)
	if err != nil || pt == kmsg.ACLResourcePatternTypeUnknown || (create && pt != kmsg.ACLResourcePatternTypeLiteral && pt != kmsg.ACLResourcePatternTypePrefixed) {
		return nil, fmt.Errorf("--resource-pattern-type %q: want literal or prefixed (any or match to filter)", s.PatternType)
	}
	b.ResourcePatternType(pt)
	hasResource := len(s.Topics)+len(s.Groups)+len(s.TxnIDs) > 0 || s.Cluster
	if create {
		if len(s.AllowPrincipals)+len(s.DenyPrincipals) == 0 {
			return nil, errors.New("give --allow-principal or --deny-principal")
		}
		if len(ops) == 0 || slices.Contains(ops, kmsg.ACLOperationAny) {
			return nil, errors.New("give --operation (not any)")
		}
		if !hasResource {
			return nil, errors.New("give --topic, --group, --transactional-id or --cluster")
		}
		b.MaybeTopics(s.Topics...).MaybeGroups(s.Groups...).MaybeTransactionalIDs(s.TxnIDs...).MaybeClusters(s.Cluster)
		if len(s.AllowPrincipals) > 0 {
			b.Allow(principals(s.AllowPrincipals)...).AllowHosts(s.AllowHosts...)
		}
		if len(s.DenyPrincipals) > 0 {
			b.Deny(principals(s.DenyPrincipals)...).DenyHosts(s.DenyHosts...)
		}
		b.Operations(ops...)
		return b, b.ValidateCreate()
	}
	if hasResource {
		b.MaybeTopics(s.Topics...).MaybeGroups(s.Groups...).MaybeTransactionalIDs(s.TxnIDs...).MaybeClusters(s.Cluster)
	} else {
		b.AnyResource()
	}
	switch {
	case len(s.AllowPrincipals)+len(s.DenyPrincipals) == 0:
		b.Allow().AllowHosts(s.AllowHosts...).Deny().DenyHosts(s.DenyHosts...)
	default:
		if len(s.AllowPrincipals) > 0 {
			b.MaybeAllow(principals(s.AllowPrincipals)...).AllowHosts(s.AllowHosts...)
		}
		if len(s.DenyPrincipals) > 0 {
			b.MaybeDeny(principals(s.DenyPrincipals)...).DenyHosts(s.DenyHosts...)
		}
	}
	b.Operations(ops...)
	return b, b.ValidateFilter()
}
