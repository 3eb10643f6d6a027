package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeGroupConfigs returns a GROUP resource's configs by name.
func describeGroupConfigs(t *testing.T, c *rawConn, group string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	req.IncludeSynonyms = true
	req.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: group}}
	resp := c.roundTrip(req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs GROUP %s: %+v", group, resp.Resources)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// alterGroupConfig applies one IncrementalAlterConfigs operation to a
// GROUP resource and returns its error code and message.
func alterGroupConfig(c *rawConn, group, name string, op kmsg.IncrementalAlterConfigOp, value *string) (int16, string) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{
		ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: group,
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: name, Op: op, Value: value}},
	}}
	resp := c.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse)
	r := resp.Resources[0]
	msg := ""
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	return r.ErrorCode, msg
}

// TestGroupConfigs: GROUP config resources describe the broker's
// consumer-group settings as defaults, take per-group values within the
// broker's bounds, give them to the group's members, and keep them
// across a restart.
func TestGroupConfigs(t *testing.T) {
	tb := startTest(t, ConsumerGroups(ConsumerGroupSettings{MaxHeartbeatInterval: 20 * time.Second}))
	c := dialRaw(t, tb.b.Addr())

	got := describeGroupConfigs(t, c, "g")
	for name, want := range map[string]string{"consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "5000"} {
		e, ok := got[name]
		if !ok || e.Value == nil || *e.Value != want || e.Source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("%s: %+v, want default %s", name, e, want)
		}
		if len(e.ConfigSynonyms) != 1 || e.ConfigSynonyms[0].Name != "group."+name {
			t.Fatalf("%s synonyms: %+v, want the broker's group.%s", name, e.ConfigSynonyms, name)
		}
	}

	// Values outside the broker's bounds, at or past the session
	// timeout, unknown names and list operations are refused.
	for _, bad := range []struct {
		name, value string
		op          kmsg.IncrementalAlterConfigOp
		code        int16
		msg         string
	}{
		{"consumer.session.timeout.ms", "1000", kmsg.IncrementalAlterConfigOpSet, kerr.InvalidConfig.Code, "group.consumer.min.session.timeout.ms"},
		{"consumer.heartbeat.interval.ms", "100", kmsg.IncrementalAlterConfigOpSet, kerr.InvalidConfig.Code, "group.consumer.min.heartbeat.interval.ms"},
		{"consumer.heartbeat.interval.ms", "soon", kmsg.IncrementalAlterConfigOpSet, kerr.InvalidConfig.Code, "milliseconds"},
		{"consumer.rebalance.ms", "1", kmsg.IncrementalAlterConfigOpSet, kerr.InvalidConfig.Code, "consumer.heartbeat.interval.ms, consumer.session.timeout.ms"},
		{"consumer.heartbeat.interval.ms", "6000", kmsg.IncrementalAlterConfigOpAppend, kerr.InvalidConfig.Code, "list"},
	} {
		v := bad.value
		code, msg := alterGroupConfig(c, "g", bad.name, bad.op, &v)
		if code != bad.code || !strings.Contains(msg, bad.msg) {
			t.Errorf("%s=%s: %v %q, want %v naming %q", bad.name, bad.value, kerr.ErrorForCode(code), msg, kerr.ErrorForCode(bad.code), bad.msg)
		}
	}
	v := "7000"
	if code, msg := alterGroupConfig(c, "g", "consumer.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpSet, &v); code != 0 {
		t.Fatalf("set heartbeat 7000: %v %s", kerr.ErrorForCode(code), msg)
	}
	e := describeGroupConfigs(t, c, "g")["consumer.heartbeat.interval.ms"]
	if *e.Value != "7000" || e.Source != kmsg.ConfigSourceGroupConfig || len(e.ConfigSynonyms) != 2 {
		t.Fatalf("after set: %+v", e)
	}
	// Another group keeps the broker's value.
	if e := describeGroupConfigs(t, c, "other")["consumer.heartbeat.interval.ms"]; *e.Value != "5000" {
		t.Fatalf("other group: %+v", e)
	}

	// The group's members are told its interval.
	if err := tb.b.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version = 1
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "g", "m1", 10000
	hb.SubscribedTopicNames = []string{"t"}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	r := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 7000 {
		t.Fatalf("heartbeat: code %v interval %d, want the group's 7000", kerr.ErrorForCode(r.ErrorCode), r.HeartbeatIntervalMillis)
	}

	// The config survives a restart, and ListConfigResources names the group.
	tb.restart()
	c = dialRaw(t, tb.b.Addr())
	if e := describeGroupConfigs(t, c, "g")["consumer.heartbeat.interval.ms"]; *e.Value != "7000" || e.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("after restart: %+v", e)
	}
	lr := kmsg.NewPtrListConfigResourcesRequest()
	lr.Version = 1
	lr.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeGroupConfig)}
	lresp := c.roundTrip(lr).(*kmsg.ListConfigResourcesResponse)
	if len(lresp.ConfigResources) != 1 || lresp.ConfigResources[0].Name != "g" {
		t.Fatalf("ListConfigResources GROUP: %+v", lresp.ConfigResources)
	}

	// DELETE returns it to the broker's value, and the group drops out of
	// the file's list.
	if code, msg := alterGroupConfig(c, "g", "consumer.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpDelete, nil); code != 0 {
		t.Fatalf("delete: %v %s", kerr.ErrorForCode(code), msg)
	}
	if e := describeGroupConfigs(t, c, "g")["consumer.heartbeat.interval.ms"]; *e.Value != "5000" || e.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("after delete: %+v", e)
	}
	if got := tb.b.sortedGroupConfigResources(); len(got) != 0 {
		t.Fatalf("groups with configs after delete: %v", got)
	}
}

// TestGroupConfigHeartbeatBelowSession: a group's heartbeat interval
// must stay shorter than its session timeout, whichever is set.
func TestGroupConfigHeartbeatBelowSession(t *testing.T) {
	b := newBroker(t, t.TempDir(), ConsumerGroups(ConsumerGroupSettings{
		MinSessionTimeout: 10 * time.Second, MaxHeartbeatInterval: 30 * time.Second,
	}))
	c := dialRaw(t, b.Addr())
	s := "12000"
	if code, msg := alterGroupConfig(c, "g", "consumer.session.timeout.ms", kmsg.IncrementalAlterConfigOpSet, &s); code != 0 {
		t.Fatalf("session 12000: %v %s", kerr.ErrorForCode(code), msg)
	}
	h := "12000"
	code, msg := alterGroupConfig(c, "g", "consumer.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpSet, &h)
	if code != kerr.InvalidConfig.Code || !strings.Contains(msg, "must be shorter than consumer.session.timeout.ms 12000") {
		t.Fatalf("heartbeat 12000 with session 12000: %v %q", kerr.ErrorForCode(code), msg)
	}
	// With the heartbeat interval left at the broker's 5 s, a 10 s
	// session timeout is accepted.
	s = "10000"
	if code, msg := alterGroupConfig(c, "g", "consumer.session.timeout.ms", kmsg.IncrementalAlterConfigOpSet, &s); code != 0 {
		t.Fatalf("session 10000: %v %s", kerr.ErrorForCode(code), msg)
	}
}
