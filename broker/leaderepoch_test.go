package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

// TestProduceStampsLeaderEpoch checks that every appended batch carries
// the broker's leader epoch (0), as a Kafka leader stamps its own,
// whatever the producer sent: librdkafka sends 0, franz-go and the Java
// client -1. A franz-go consumer orders commits by (epoch, offset), so
// with mixed epochs its commits stopped at the last epoch-0 batch and a
// restarted group read the rest again.
func TestProduceStampsLeaderEpoch(t *testing.T) {
	tb := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tb.b.CreateTopic(ctx, "e", 1, nil); err != nil {
		t.Fatal(err)
	}
	for _, epoch := range []int32{0, -1, 7} {
		b := storagetest.MakeBatch(2, 10, 1)
		batch.SetPartitionLeaderEpoch(b, epoch)
		if _, err := tb.b.AppendBatch(ctx, "e", 0, b, -1); err != nil {
			t.Fatal(err)
		}
	}
	pc := tb.client() // franz-go sends -1 in Produce requests
	if err := pc.ProduceSync(ctx, &kgo.Record{Topic: "e", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	const want = 7
	cl := tb.client(kgo.ConsumerGroup("g"), kgo.ConsumeTopics("e"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < want; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("after %d of %d records: %v", got, want, err)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch: %v", fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.LeaderEpoch != 0 {
				t.Errorf("offset %d has leader epoch %d, want 0", r.Offset, r.LeaderEpoch)
			}
		})
		got += fs.NumRecords()
		if err := cl.CommitRecords(ctx, fs.Records()...); err != nil {
			t.Fatal(err)
		}
	}
	offs, err := kadm.NewClient(pc).FetchOffsets(ctx, "g")
	if err != nil || offs.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, offs.Error())
	}
	if o, _ := offs.Lookup("e", 0); o.At != want {
		t.Fatalf("committed offset %d, want %d", o.At, want)
	}
}
