package auth

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/vfs"
)

// securityOps is the workload of the security crash test, in order: each
// step changes the credential or the ACL store. A step's effect is one
// of the states the stores may hold after a crash.
type securityOp struct {
	name string
	run  func(c *Credentials, a *ACLs) error
}

func securityOps() []securityOp {
	acl := func(user string) ACL {
		return ACL{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t", PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:" + user, Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	}
	anyACL := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	user := func(name string) *string { return &name }
	return []securityOp{
		{"set alice", func(c *Credentials, _ *ACLs) error { return c.SetPassword("alice", ScramSHA256, "pw-a", MinIterations) }},
		{"allow alice", func(_ *Credentials, a *ACLs) error { return a.Create(acl("alice")) }},
		{"set bob", func(c *Credentials, _ *ACLs) error { return c.SetPassword("bob", ScramSHA512, "pw-b", MinIterations) }},
		{"allow bob", func(_ *Credentials, a *ACLs) error { return a.Create(acl("bob")) }},
		{"delete alice", func(c *Credentials, _ *ACLs) error { return c.Delete("alice", ScramSHA256) }},
		{"deny alice", func(_ *Credentials, a *ACLs) error {
			f := anyACL
			f.Principal = user("User:alice")
			_, err := a.Delete(f)
			return err
		}},
	}
}

// securityState is what the stores hold, as text to compare.
func securityState(c *Credentials, a *ACLs) string {
	var users []string
	for _, u := range c.Describe() {
		users = append(users, u.Name)
	}
	var principals []string
	for _, x := range a.Describe(Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}) {
		principals = append(principals, x.Principal)
	}
	return fmt.Sprintf("users %v acls %v", users, principals)
}

func openSecurity(t *testing.T, fs vfs.FS) (*Credentials, *ACLs, error) {
	t.Helper()
	if err := vfs.MkdirAllPrivate(fs, "data/security"); err != nil {
		return nil, nil, err
	}
	c, err := OpenCredentials(fs, "data/security")
	if err != nil {
		return nil, nil, err
	}
	a, err := OpenACLs(fs, "data/security")
	if err != nil {
		return nil, nil, err
	}
	return c, a, nil
}

// TestSecurityFilesCrashAtEveryBoundary crashes the machine at every
// mutating filesystem operation of a workload over both stores. After
// the crash the stores open, and hold the state after the last
// acknowledged step or after the one that was in flight: every
// acknowledged change survives, and nothing is half written.
func TestSecurityFilesCrashAtEveryBoundary(t *testing.T) {
	ops := securityOps()
	// states[i] is the state after the first i steps.
	clean := vfs.NewMem()
	c, a, err := openSecurity(t, clean)
	if err != nil {
		t.Fatal(err)
	}
	states := []string{securityState(c, a)}
	for _, op := range ops {
		if err := op.run(c, a); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		states = append(states, securityState(c, a))
	}
	total := clean.Seq()
	rng := rand.New(rand.NewPCG(5, 6))
	for n := int64(1); n <= total+1; n++ {
		for _, tear := range []bool{false, true} {
			fs := vfs.NewMem()
			fs.Inject(vfs.FailFromSeq(n, syscall.EIO))
			acked := -1 // the steps acknowledged; -1: the stores did not open
			if c, a, err := openSecurity(t, fs); err == nil {
				acked = 0
				for _, op := range ops {
					if op.run(c, a) != nil {
						break
					}
					acked++
				}
			}
			crashed := fs.CrashClone(vfs.CrashOptions{Tear: tear, Rand: rng})
			c, a, err := openSecurity(t, crashed)
			if err != nil {
				t.Fatalf("crash at op %d (tear %v): reopen: %v", n, tear, err)
			}
			got := securityState(c, a)
			lo := max(acked, 0)
			if got != states[lo] && (lo+1 >= len(states) || got != states[lo+1]) {
				t.Fatalf("crash at op %d (tear %v) after %d acknowledged steps: stores hold %q, want %q or the next step's state", n, tear, acked, got, states[lo])
			}
		}
	}
}
