package auth

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/vfs"
)

// FuzzSASL feeds arbitrary client messages to every mechanism. Invariants:
// no panic; an exchange never succeeds without the password (the store
// holds one user whose password the fuzzer is not given as a whole
// message sequence that it could guess only by producing a valid proof);
// every error is ErrAuthFailed; a PLAIN success names a stored user.
func FuzzSASL(f *testing.F) {
	c, err := OpenCredentials(vfs.OS(), f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, m := range ScramMechanisms {
		if err := c.SetPassword("alice", m, "correct horse", 4096); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(uint8(0), []byte("\x00alice\x00guess"), []byte(""))
	f.Add(uint8(1), []byte("n,,n=alice,r=abcdef"), []byte("c=biws,r=abcdef,p=AAAA"))
	f.Add(uint8(2), []byte("n,a=alice,n=alice,r=x,tokenauth=true"), []byte("c=biws,r=x,p="))
	f.Add(uint8(2), []byte("p=tls-unique,,n=alice,r=x"), []byte(",p=,p="))
	f.Fuzz(func(t *testing.T, which uint8, first, final []byte) {
		mech := Mechanisms[int(which)%len(Mechanisms)]
		s, err := c.NewSession(mech)
		if err != nil {
			t.Fatal(err)
		}
		_, done, err := s.Step(first)
		if err != nil {
			if !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("first step error %v is not ErrAuthFailed", err)
			}
			return
		}
		if done {
			if mech != Plain || string(first) == "" {
				t.Fatalf("%s done after one message %q", mech, first)
			}
			if s.User() != "alice" || !c.CheckPlain("alice", "correct horse") {
				t.Fatalf("PLAIN succeeded for %q", s.User())
			}
			return
		}
		_, done, err = s.Step(final)
		if err == nil && done {
			t.Fatalf("%s succeeded with a fuzzed proof: %q then %q", mech, first, final)
		}
		if err != nil && !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("final step error %v is not ErrAuthFailed", err)
		}
	})
}

// FuzzACLFilter checks filter matching against its definition: ANY
// fields match everything; an exact filter built from a binding matches
// it; Validate never panics; MATCH with a name selects exactly the
// bindings whose pattern applies to that name.
func FuzzACLFilter(f *testing.F) {
	f.Add(int8(2), "orders", int8(3), "User:a", "*", int8(3), int8(3), int8(2), "ord", int8(4), true)
	f.Add(int8(1), "", int8(1), "User:*", "h", int8(1), int8(1), int8(2), "*", int8(2), false)
	f.Fuzz(func(t *testing.T, rt int8, name string, pt int8, principal, host string, op, perm int8, frt int8, fname string, fpt int8, withName bool) {
		a := ACL{ResourceType: kmsg.ACLResourceType(rt), ResourceName: name, PatternType: kmsg.ACLResourcePatternType(pt),
			Principal: principal, Host: host, Operation: kmsg.ACLOperation(op), Permission: kmsg.ACLPermissionType(perm)}
		_ = a.Validate()
		exact := Filter{ResourceType: a.ResourceType, ResourceName: &a.ResourceName, PatternType: a.PatternType,
			Principal: &a.Principal, Host: &a.Host, Operation: a.Operation, Permission: a.Permission}
		if a.Validate() == nil && !exact.Matches(a) {
			t.Fatalf("exact filter does not match %v", a)
		}
		any := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
		if !any.Matches(a) {
			t.Fatalf("ANY filter does not match %v", a)
		}
		f := any
		f.ResourceType, f.PatternType = kmsg.ACLResourceType(frt), kmsg.ACLResourcePatternType(fpt)
		if withName {
			f.ResourceName = &fname
		}
		_ = f.Validate()
		got := f.Matches(a)
		if f.PatternType == kmsg.ACLResourcePatternTypeMatch && withName && a.Validate() == nil &&
			(f.ResourceType == kmsg.ACLResourceTypeAny || f.ResourceType == a.ResourceType) {
			if want := patternApplies(a, fname); got != want {
				t.Fatalf("MATCH %q on %v = %v, want %v", fname, a, got, want)
			}
		}
		if got && f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != a.ResourceType {
			t.Fatalf("filter of type %v matched %v", f.ResourceType, a)
		}
	})
}
