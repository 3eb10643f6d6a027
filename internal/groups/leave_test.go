package groups

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLeavingMemberID: a leaving member given by member id, or by
// instance id for a static member, with the errors Kafka gives.
func TestLeavingMemberID(t *testing.T) {
	static := map[string]string{"inst-1": "m1"}
	inst := func(s string) *string { return &s }
	for _, c := range []struct {
		member   string
		instance *string
		id       string
		code     int16
	}{
		{"m2", nil, "m2", errNone},
		{"m2", inst(""), "m2", errNone},                 // an empty instance id is none
		{"", inst("inst-1"), "m1", errNone},             // the instance id names the member
		{"m1", inst("inst-1"), "m1", errNone},           // both, agreeing
		{"m9", inst("inst-1"), "", errFencedInstanceID}, // another member's instance id
		{"", inst("inst-9"), "", errUnknownMemberID},
	} {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID, lm.InstanceID = c.member, c.instance
		id, code := leavingMemberID(lm, static)
		if id != c.id || code != c.code {
			t.Errorf("member %q instance %v: %q, code %d; want %q, code %d", c.member, c.instance, id, code, c.id, c.code)
		}
	}
}
