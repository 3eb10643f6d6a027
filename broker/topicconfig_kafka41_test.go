package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestHonouredTopicConfigs: compression.type other than producer is
// refused, at creation and alteration; min.insync.replicas above 1 makes
// acks=all produce fail with NOT_ENOUGH_REPLICAS while acks=1 succeeds,
// until it is set back to 1.
func TestHonouredTopicConfigs(t *testing.T) {
	tb := startTest(t)
	ctx := t.Context()
	adm := kadm.NewClient(tb.client())
	gzip, producer, two, one := "gzip", "producer", "2", "1"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"compression.type": &gzip}, "zipped"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("create with compression.type=gzip: %v", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"compression.type": &producer, "min.insync.replicas": &two}, "strict"); err != nil {
		t.Fatalf("create with compression.type=producer, min.insync.replicas=2: %v", err)
	}
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: &gzip}}, "strict")
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("alter compression.type=gzip: %+v, %v", rs, err)
	}
	all := tb.client(kgo.DefaultProduceTopic("strict"), kgo.RecordRetries(1))
	if err := all.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with min.insync.replicas=2: %v", err)
	}
	leader := tb.client(kgo.DefaultProduceTopic("strict"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err := leader.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("acks=1 with min.insync.replicas=2: %v", err)
	}
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &one}}, "strict"); err != nil || rs[0].Err != nil {
		t.Fatalf("alter min.insync.replicas=1: %+v, %v", rs, err)
	}
	if err := all.ProduceSync(ctx, &kgo.Record{Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatalf("acks=all with min.insync.replicas=1: %v", err)
	}
	zero := "0"
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &zero}}, "strict"); err != nil || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("alter min.insync.replicas=0: %+v, %v", rs, err)
	}
}
