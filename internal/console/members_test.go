package console

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestDescribedGroup: the group of a describe answer, or why there is
// none: the request's error, the group's, or an answer without it.
func TestDescribedGroup(t *testing.T) {
	groupErr := func(d *kadm.DescribedGroup) error { return d.Err }
	reqErr := errors.New("request failed")
	described := kadm.DescribedGroups{
		"g":   {Group: "g", State: "Stable"},
		"bad": {Group: "bad", Err: kerr.GroupAuthorizationFailed},
	}
	if d, err := describedGroup(described, nil, "g", groupErr); err != nil || d == nil || d.State != "Stable" {
		t.Fatalf("present group: %+v, %v", d, err)
	}
	if d, err := describedGroup(described, reqErr, "g", groupErr); d != nil || err != reqErr {
		t.Fatalf("failed request: %+v, %v", d, err)
	}
	if d, err := describedGroup(described, nil, "bad", groupErr); d != nil || !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("group with an error: %+v, %v", d, err)
	}
	if d, err := describedGroup(described, nil, "none", groupErr); d != nil || err != nil {
		t.Fatalf("group left out: %+v, %v", d, err)
	}
	id := "static-1"
	if orEmpty(&id) != "static-1" || orEmpty(nil) != "" {
		t.Fatal("orEmpty")
	}
}
