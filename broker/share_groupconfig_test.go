package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareGroupConfigs: a share group's own settings are GROUP config
// resources: described with the broker's values as defaults, checked
// against Kafka's bounds widened to the broker's values, and applied to
// the group without a restart: a group set to share.auto.offset.reset
// earliest on a broker whose groups start at latest reads a topic from
// its first record.
func TestShareGroupConfigs(t *testing.T) {
	tb := startTest(t, shareOpts(ShareGroupSettings{AutoOffsetReset: "latest"}))
	c := dialRaw(t, tb.b.Addr())

	got := describeGroupConfigs(t, c, "sg")
	for name, want := range map[string]struct {
		value, synonym string
		src            kmsg.ConfigSource
	}{
		"share.auto.offset.reset":       {"latest", "share.auto.offset.reset", kmsg.ConfigSourceDefaultConfig},
		"share.isolation.level":         {"read_uncommitted", "share.isolation.level", kmsg.ConfigSourceDefaultConfig},
		"share.record.lock.duration.ms": {"2000", "group.share.record.lock.duration.ms", kmsg.ConfigSourceStaticBrokerConfig},
		"share.heartbeat.interval.ms":   {"200", "group.share.heartbeat.interval.ms", kmsg.ConfigSourceStaticBrokerConfig},
		"share.session.timeout.ms":      {"45000", "group.share.session.timeout.ms", kmsg.ConfigSourceDefaultConfig},
	} {
		e, ok := got[name]
		if !ok || e.Value == nil || *e.Value != want.value || e.Source != want.src {
			t.Errorf("%s: %+v, want %s from %v", name, e, want.value, want.src)
			continue
		}
		if len(e.ConfigSynonyms) != 1 || e.ConfigSynonyms[0].Name != want.synonym {
			t.Errorf("%s synonyms: %+v, want %s", name, e.ConfigSynonyms, want.synonym)
		}
	}

	for _, bad := range []struct{ name, value, msg string }{
		{"share.record.lock.duration.ms", "70000", "group.share.max.record.lock.duration.ms"},
		{"share.record.lock.duration.ms", "1000", "[2000, 60000]"}, // Kafka's 15000 widened to the broker's 2000
		{"share.session.timeout.ms", "30000", "group.share.min.session.timeout.ms"},
		{"share.heartbeat.interval.ms", "16000", "group.share.max.heartbeat.interval.ms"},
		{"share.session.timeout.ms", "50s", "whole number of milliseconds"},
		// Kafka 4.2 has these as broker settings only.
		{"share.delivery.count.limit", "3", "unknown group config"},
		{"share.partition.max.record.locks", "500", "unknown group config"},
		{"share.auto.offset.reset", "oldest", "latest, earliest or by_duration"},
		{"share.auto.offset.reset", "by_duration:1h", "ISO-8601"},
		{"share.isolation.level", "serializable", "read_uncommitted or read_committed"},
	} {
		v := bad.value
		code, msg := alterGroupConfig(c, "sg", bad.name, kmsg.IncrementalAlterConfigOpSet, &v)
		if code != kerr.InvalidConfig.Code || !strings.Contains(msg, bad.msg) {
			t.Errorf("%s=%s: %v %q, want INVALID_CONFIG naming %q", bad.name, bad.value, kerr.ErrorForCode(code), msg, bad.msg)
		}
	}

	if err := tb.b.CreateTopic(t.Context(), "q", 1, nil); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Topic: "q", Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := tb.client().ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Set through an admin client's IncrementalAlterConfigs (kadm has no
	// GROUP config helper: the request is sent with its kgo client).
	admCl := tb.client()
	adm := kadm.NewClient(admCl)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
	for _, kv := range [][2]string{{"share.auto.offset.reset", "earliest"}, {"share.record.lock.duration.ms", "15000"}} {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = kv[0], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[1])
		res.Configs = append(res.Configs, cfg)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(t.Context(), admCl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs: %v %+v", err, resp)
	}
	e := describeGroupConfigs(t, c, "sg")["share.auto.offset.reset"]
	if *e.Value != "earliest" || e.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("after set: %+v", e)
	}

	cl := shareClient(t, tb, "sg", "q")
	var vals []string
	WaitFor(t, "the earliest group to read 10 records", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second) // a bound on one poll, not an assertion
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			vals = append(vals, string(r.Value))
			r.Ack(kgo.AckAccept)
		})
		return len(vals) >= 10
	})
	want := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
	if !slices.Equal(vals, want) {
		t.Fatalf("the earliest group read %v, want %v", vals, want)
	}
	if err := cl.FlushAcks(t.Context()); err != nil {
		t.Fatal(err)
	}
	d, err := adm.DescribeShareGroupOffsets(t.Context(), "sg")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := d["sg"].Offsets.Lookup("q", 0); !ok || o.StartOffset != 10 || o.Lag != 0 {
		t.Fatalf("share-partition start after accepting all: %+v %v, want 10 with no lag", o, ok)
	}

	// Another share group keeps the broker's latest: it starts at the
	// end, so its share partition begins at offset 10.
	other := shareClient(t, tb, "other", "q")
	ctx, cancel := context.WithCancel(t.Context())
	polled := make(chan int)
	go func() {
		n := 0
		for ctx.Err() == nil {
			n += other.PollFetches(ctx).NumRecords()
		}
		polled <- n
	}()
	WaitFor(t, "the other group's share partition", func() bool {
		d, err := adm.DescribeShareGroupOffsets(t.Context(), "other")
		if err != nil {
			return false
		}
		o, ok := d["other"].Offsets.Lookup("q", 0)
		return ok && o.StartOffset == 10
	})
	cancel()
	if n := <-polled; n != 0 {
		t.Fatalf("the latest group got %d records, want none", n)
	}
	other.Close()

	// The configs survive a restart.
	tb.restart()
	c = dialRaw(t, tb.b.Addr())
	if e := describeGroupConfigs(t, c, "sg")["share.record.lock.duration.ms"]; *e.Value != "15000" || e.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("after restart: %+v", e)
	}
}

// TestShareGroupConfigHeartbeatBelowSession: a share group's heartbeat
// interval must stay shorter than its session timeout, which a broker
// with a short session timeout lets a group come close to.
func TestShareGroupConfigHeartbeatBelowSession(t *testing.T) {
	b := newBroker(t, t.TempDir(), ShareGroups(ShareGroupSettings{SessionTimeout: 10 * time.Second, HeartbeatInterval: time.Second}))
	c := dialRaw(t, b.Addr())
	v := "12000"
	code, msg := alterGroupConfig(c, "sg", "share.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpSet, &v)
	if code != kerr.InvalidConfig.Code || !strings.Contains(msg, "shorter than share.session.timeout.ms 10000") {
		t.Fatalf("heartbeat 12000 with session 10000: %v %q", kerr.ErrorForCode(code), msg)
	}
	v = "30000"
	if code, msg := alterGroupConfig(c, "sg", "share.session.timeout.ms", kmsg.IncrementalAlterConfigOpSet, &v); code != 0 {
		t.Fatalf("session 30000 (within Kafka's 45000 widened to the broker's 10000): %v %s", kerr.ErrorForCode(code), msg)
	}
	v = "12000"
	if code, msg := alterGroupConfig(c, "sg", "share.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpSet, &v); code != 0 {
		t.Fatalf("heartbeat 12000 with session 30000: %v %s", kerr.ErrorForCode(code), msg)
	}
}
