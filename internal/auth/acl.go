package auth

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/vfs"
)

// ClusterName is the only name of the cluster resource (Kafka's
// "kafka-cluster").
const ClusterName = "kafka-cluster"

// Anonymous is the principal of a connection that did not authenticate
// (PLAINTEXT, or SSL without a client certificate).
const Anonymous = "User:ANONYMOUS"

// ACL is one binding: Principal may (ALLOW) or may not (DENY) perform
// Operation on the resources matched by ResourceType, ResourceName and
// PatternType, from Host ("*" for any host).
type ACL struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName string                      `json:"resource_name"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

func (a ACL) String() string {
	return fmt.Sprintf("%s %s on %s:%s:%s from %s: %s", a.Principal, a.Permission, a.ResourceType, a.PatternType, a.ResourceName, a.Host, a.Operation)
}

// ErrInvalidACL is wrapped by Validate's errors.
var ErrInvalidACL = errors.New("invalid ACL")

// Validate checks that a is a binding CreateAcls may store (what Kafka
// refuses with INVALID_REQUEST).
func (a ACL) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidACL}, args...)...)
	}
	switch a.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeTransactionalId,
		kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser:
	case kmsg.ACLResourceTypeCluster:
		if a.ResourceName != ClusterName {
			return bad("the cluster resource is named %q, not %q", ClusterName, a.ResourceName)
		}
	default:
		return bad("resource type %s is not one of topic, group, cluster, transactional_id, delegation_token, user", a.ResourceType)
	}
	if a.ResourceName == "" {
		return bad("empty resource name")
	}
	switch a.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
	case kmsg.ACLResourcePatternTypePrefixed:
		if a.ResourceName == "*" {
			return bad("a prefixed pattern cannot be the wildcard *")
		}
	default:
		return bad("pattern type %s is not literal or prefixed", a.PatternType)
	}
	if _, name, ok := strings.Cut(a.Principal, ":"); !ok || name == "" || !strings.HasPrefix(a.Principal, "User:") {
		return bad("principal %q is not of the form User:NAME", a.Principal)
	}
	if a.Host == "" {
		return bad("empty host (use * for any host)")
	}
	if a.Operation <= kmsg.ACLOperationAny || a.Operation > kmsg.ACLOperationDescribeTokens {
		return bad("operation %s", a.Operation)
	}
	if a.Permission != kmsg.ACLPermissionTypeAllow && a.Permission != kmsg.ACLPermissionTypeDeny {
		return bad("permission %s is not ALLOW or DENY", a.Permission)
	}
	return nil
}

// Filter selects ACLs, as DescribeAcls and DeleteAcls carry it: a nil
// string, ResourceType ANY, PatternType ANY, Operation ANY and
// Permission ANY match everything. PatternType MATCH with a name selects
// every binding that applies to that resource: the literal name, the
// literal wildcard "*" and every prefix of the name.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Validate rejects filters that can match nothing for a reason the
// caller should hear about (UNKNOWN values).
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == kmsg.ACLResourceTypeUnknown || f.ResourceType > kmsg.ACLResourceTypeUser:
		return fmt.Errorf("%w filter: resource type %s", ErrInvalidACL, f.ResourceType)
	case f.PatternType == kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w filter: pattern type %s", ErrInvalidACL, f.PatternType)
	case f.Operation == kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("%w filter: operation %s", ErrInvalidACL, f.Operation)
	case f.Permission == kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("%w filter: permission %s", ErrInvalidACL, f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects a.
func (f Filter) Matches(a ACL) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != a.ResourceType {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny:
		if f.ResourceName != nil && *f.ResourceName != a.ResourceName {
			return false
		}
	case kmsg.ACLResourcePatternTypeMatch:
		if f.ResourceName != nil && !patternApplies(a, *f.ResourceName) {
			return false
		}
	default:
		if f.PatternType != a.PatternType || (f.ResourceName != nil && *f.ResourceName != a.ResourceName) {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != a.Principal {
		return false
	}
	if f.Host != nil && *f.Host != a.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != a.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == a.Permission
}

// patternApplies reports whether a's resource pattern covers the
// resource called name: literal equal, the literal wildcard, or a prefix.
func patternApplies(a ACL, name string) bool {
	switch a.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return a.ResourceName == name || a.ResourceName == "*"
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, a.ResourceName)
	}
	return false
}

// ACLs is the ACL store, persisted in acls.json. It is safe for
// concurrent use.
type ACLs struct {
	fs   vfs.FS
	path string

	mu   sync.RWMutex // guards acls and serializes file writes
	acls []ACL        // in creation order, no duplicates; replaced, never changed in place
}

// OpenACLs loads (or starts empty) the ACL store in dir on fsys; dir
// must exist.
func OpenACLs(fsys vfs.FS, dir string) (*ACLs, error) {
	s := &ACLs{fs: fsys, path: filepath.Join(dir, "acls.json")}
	if err := readJSON(fsys, s.path, &s.acls); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	for _, a := range s.acls {
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("auth: acls.json: %w", err)
		}
	}
	return s, nil
}

// Create adds bindings (ignoring ones already stored) and returns once
// they are fsynced. Each is validated first; nothing is stored if one is
// invalid.
func (s *ACLs) Create(acls ...ACL) error {
	for _, a := range acls {
		if err := a.Validate(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := slices.Clone(s.acls)
	for _, a := range acls {
		if !slices.Contains(next, a) {
			next = append(next, a)
		}
	}
	if err := writeJSON(s.fs, s.path, next); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	s.acls = next
	return nil
}

// Describe returns the bindings f matches.
func (s *ACLs) Describe(f Filter) []ACL {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []ACL
	for _, a := range s.acls {
		if f.Matches(a) {
			out = append(out, a)
		}
	}
	return out
}

// Delete removes, for each filter, the bindings it matches, and returns
// them per filter once the change is fsynced.
func (s *ACLs) Delete(fs ...Filter) ([][]ACL, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]ACL, len(fs))
	gone := map[int]bool{}
	for i, f := range fs {
		for j, a := range s.acls {
			if f.Matches(a) {
				out[i] = append(out[i], a)
				gone[j] = true
			}
		}
	}
	if len(gone) == 0 {
		return out, nil
	}
	next := make([]ACL, 0, len(s.acls)-len(gone))
	for j, a := range s.acls {
		if !gone[j] {
			next = append(next, a)
		}
	}
	if err := writeJSON(s.fs, s.path, next); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	s.acls = next
	return out, nil
}

func (s *ACLs) snapshot() []ACL {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.acls
}
