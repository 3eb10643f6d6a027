package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"

	"github.com/sluicedb/sluice/internal/vfs"
)

func TestCredentialsPersistAndCheck(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCredentials(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Empty() {
		t.Fatal("new store not empty")
	}
	for _, m := range ScramMechanisms {
		if err := c.SetPassword("alice", m, "s3cret-pw", 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetPassword("alice", "SCRAM-SHA-1", "x", 0); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("SHA-1: %v", err)
	}
	if err := c.SetPassword("alice", ScramSHA256, "x", 100); !errors.Is(err, ErrBadCredential) {
		t.Fatalf("100 iterations: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "s3cret-pw") {
		t.Fatal("the password is stored in clear")
	}
	// Reopen: the same credentials check.
	c, err = OpenCredentials(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !c.CheckPlain("alice", "s3cret-pw") || c.CheckPlain("alice", "wrong") || c.CheckPlain("bob", "s3cret-pw") {
		t.Fatal("CheckPlain after reopen is wrong")
	}
	if got := c.Describe(); len(got) != 1 || len(got[0].Mechanisms) != 2 || got[0].Mechanisms[0].Iterations != DefaultIterations {
		t.Fatalf("Describe = %+v", got)
	}
	if err := c.Delete("alice", ScramSHA512); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete("alice", ScramSHA512); !errors.Is(err, ErrNoCredential) {
		t.Fatalf("second Delete: %v", err)
	}
	if !c.CheckPlain("alice", "s3cret-pw") {
		t.Fatal("PLAIN no longer checks against the SHA-256 credential")
	}
}

// scramLogin runs a whole SCRAM exchange with xdg-go/scram as the client.
func scramLogin(t *testing.T, c *Credentials, mech, user, pw string) error {
	t.Helper()
	hg := scram.SHA256
	if mech == ScramSHA512 {
		hg = scram.SHA512
	}
	cl, err := hg.NewClientUnprepped(user, pw, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.NewConversation()
	s, err := c.NewSession(mech)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := conv.Step("")
	for i := 0; ; i++ {
		reply, done, err := s.Step([]byte(msg))
		if err != nil {
			return err
		}
		if msg, err = conv.Step(string(reply)); err != nil {
			t.Fatalf("client rejected the server: %v", err)
		}
		if done {
			if !conv.Valid() || s.User() != user {
				t.Fatalf("exchange done but client valid=%v user=%q", conv.Valid(), s.User())
			}
			return nil
		}
		if i > 2 {
			t.Fatal("exchange does not end")
		}
	}
}

func TestSCRAMAndPlainSessions(t *testing.T) {
	c, err := OpenCredentials(vfs.OS(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ScramMechanisms {
		if err := c.SetPassword("u,=x", m, "pw", 4096); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ScramMechanisms {
		if err := scramLogin(t, c, m, "u,=x", "pw"); err != nil {
			t.Fatalf("%s good password: %v", m, err)
		}
		if err := scramLogin(t, c, m, "u,=x", "bad"); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("%s bad password: %v", m, err)
		}
		if err := scramLogin(t, c, m, "nobody", "pw"); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("%s unknown user: %v", m, err)
		}
	}
	for _, tc := range []struct {
		msg string
		ok  bool
	}{
		{"\x00u,=x\x00pw", true},
		{"u,=x\x00u,=x\x00pw", true},
		{"other\x00u,=x\x00pw", false},
		{"\x00u,=x\x00bad", false},
		{"\x00u,=x", false},
		{"", false},
	} {
		s, _ := c.NewSession(Plain)
		_, done, err := s.Step([]byte(tc.msg))
		if (err == nil && done) != tc.ok {
			t.Errorf("PLAIN %q: done=%v err=%v, want ok=%v", tc.msg, done, err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("PLAIN error %q shows the password", err)
		}
	}
}

func lit(rt kmsg.ACLResourceType, name string, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) ACL {
	return ACL{ResourceType: rt, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: principal, Host: "*", Operation: op, Permission: perm}
}

func TestAuthorizer(t *testing.T) {
	const (
		topic   = kmsg.ACLResourceTypeTopic
		group   = kmsg.ACLResourceTypeGroup
		allow   = kmsg.ACLPermissionTypeAllow
		deny    = kmsg.ACLPermissionTypeDeny
		read    = kmsg.ACLOperationRead
		write   = kmsg.ACLOperationWrite
		desc    = kmsg.ACLOperationDescribe
		all     = kmsg.ACLOperationAll
		alterC  = kmsg.ACLOperationAlterConfigs
		descC   = kmsg.ACLOperationDescribeConfigs
		deleteO = kmsg.ACLOperationDelete
	)
	prefixed := func(a ACL) ACL { a.PatternType = kmsg.ACLResourcePatternTypePrefixed; return a }
	host := func(a ACL, h string) ACL { a.Host = h; return a }
	for _, tc := range []struct {
		name      string
		acls      []ACL
		allowNone bool
		principal string
		host      string
		op        kmsg.ACLOperation
		rt        kmsg.ACLResourceType
		res       string
		want      bool
	}{
		{"no ACLs", nil, false, "User:a", "1.2.3.4", read, topic, "t", false},
		{"no ACLs, allow.everyone.if.no.acl.found", nil, true, "User:a", "1.2.3.4", read, topic, "t", true},
		{"ACL for another resource, allow if none", []ACL{lit(topic, "u", "User:b", read, allow)}, true, "User:a", "h", read, topic, "t", true},
		{"ACL on the resource for another user, allow if none", []ACL{lit(topic, "t", "User:b", read, allow)}, true, "User:a", "h", read, topic, "t", false},
		{"superuser", []ACL{lit(topic, "t", "User:admin", read, deny)}, false, "User:admin", "h", write, topic, "t", true},
		{"literal allow", []ACL{lit(topic, "t", "User:a", read, allow)}, false, "User:a", "h", read, topic, "t", true},
		{"literal allow other op", []ACL{lit(topic, "t", "User:a", read, allow)}, false, "User:a", "h", write, topic, "t", false},
		{"read implies describe", []ACL{lit(topic, "t", "User:a", read, allow)}, false, "User:a", "h", desc, topic, "t", true},
		{"write implies describe", []ACL{lit(topic, "t", "User:a", write, allow)}, false, "User:a", "h", desc, topic, "t", true},
		{"delete implies describe", []ACL{lit(group, "g", "User:a", deleteO, allow)}, false, "User:a", "h", desc, group, "g", true},
		{"alter_configs implies describe_configs", []ACL{lit(topic, "t", "User:a", alterC, allow)}, false, "User:a", "h", descC, topic, "t", true},
		{"describe does not imply read", []ACL{lit(topic, "t", "User:a", desc, allow)}, false, "User:a", "h", read, topic, "t", false},
		{"all", []ACL{lit(topic, "t", "User:a", all, allow)}, false, "User:a", "h", write, topic, "t", true},
		{"wildcard resource", []ACL{lit(topic, "*", "User:a", read, allow)}, false, "User:a", "h", read, topic, "anything", true},
		{"wildcard principal", []ACL{lit(topic, "t", "User:*", read, allow)}, false, "User:z", "h", read, topic, "t", true},
		{"prefixed allow", []ACL{prefixed(lit(topic, "or", "User:a", read, allow))}, false, "User:a", "h", read, topic, "orders", true},
		{"prefixed not a prefix", []ACL{prefixed(lit(topic, "or", "User:a", read, allow))}, false, "User:a", "h", read, topic, "xorders", false},
		{"prefixed deny beats literal allow", []ACL{lit(topic, "orders", "User:a", read, allow), prefixed(lit(topic, "ord", "User:a", read, deny))}, false, "User:a", "h", read, topic, "orders", false},
		{"deny all beats allow", []ACL{lit(topic, "t", "User:a", read, allow), lit(topic, "t", "User:a", all, deny)}, false, "User:a", "h", read, topic, "t", false},
		{"deny read leaves describe", []ACL{lit(topic, "t", "User:a", read, allow), lit(topic, "t", "User:a", read, deny)}, false, "User:a", "h", desc, topic, "t", true},
		{"wildcard deny", []ACL{lit(topic, "t", "User:a", read, allow), lit(topic, "*", "User:*", read, deny)}, false, "User:a", "h", read, topic, "t", false},
		{"host match", []ACL{host(lit(topic, "t", "User:a", read, allow), "10.0.0.1")}, false, "User:a", "10.0.0.1", read, topic, "t", true},
		{"host mismatch", []ACL{host(lit(topic, "t", "User:a", read, allow), "10.0.0.1")}, false, "User:a", "10.0.0.2", read, topic, "t", false},
		{"group resource type", []ACL{lit(topic, "g", "User:a", read, allow)}, false, "User:a", "h", read, group, "g", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenACLs(vfs.OS(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.acls) > 0 {
				if err := s.Create(tc.acls...); err != nil {
					t.Fatal(err)
				}
			}
			z := &Authorizer{ACLs: s, SuperUsers: []string{"User:admin"}, AllowIfNoACL: tc.allowNone}
			if got := z.Authorize(tc.principal, tc.host, tc.op, tc.rt, tc.res); got != tc.want {
				t.Fatalf("Authorize = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestACLStoreFiltersPersist(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenACLs(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	a := lit(kmsg.ACLResourceTypeTopic, "orders", "User:a", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	b := a
	b.PatternType, b.ResourceName = kmsg.ACLResourcePatternTypePrefixed, "ord"
	c := lit(kmsg.ACLResourceTypeGroup, "g", "User:b", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	if err := s.Create(a, b, c, a); err != nil {
		t.Fatal(err)
	}
	bad := a
	bad.Principal = "alice"
	if err := s.Create(bad); !errors.Is(err, ErrInvalidACL) {
		t.Fatalf("bad principal: %v", err)
	}
	s, err = OpenACLs(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	name := "orders"
	any := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	if got := s.Describe(any); len(got) != 3 {
		t.Fatalf("all: %v", got)
	}
	match := any
	match.ResourceType, match.ResourceName, match.PatternType = kmsg.ACLResourceTypeTopic, &name, kmsg.ACLResourcePatternTypeMatch
	if got := s.Describe(match); len(got) != 2 {
		t.Fatalf("MATCH orders: %v", got)
	}
	literal := match
	literal.PatternType = kmsg.ACLResourcePatternTypeLiteral
	if got := s.Describe(literal); len(got) != 1 || got[0] != a {
		t.Fatalf("LITERAL orders: %v", got)
	}
	user := "User:b"
	byUser := any
	byUser.Principal = &user
	deleted, err := s.Delete(byUser)
	if err != nil || len(deleted[0]) != 1 || deleted[0][0] != c {
		t.Fatalf("Delete by principal: %v %v", deleted, err)
	}
	s, _ = OpenACLs(vfs.OS(), dir)
	if got := s.Describe(any); len(got) != 2 {
		t.Fatalf("after delete and reopen: %v", got)
	}
}
