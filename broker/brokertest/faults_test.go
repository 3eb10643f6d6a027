package brokertest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/broker/brokertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("faults"), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// records reads the topic from its start to its end.
func records(t *testing.T, addr string) []string {
	t.Helper()
	cl := client(t, addr, kgo.ConsumeTopics("faults"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	end, err := kadmEnd(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for int64(len(got)) < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(got), end)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// kadmEnd is partition 0's end offset.
func kadmEnd(ctx context.Context, cl *kgo.Client) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	tp := kmsg.NewListOffsetsRequestTopic()
	tp.Topic = "faults"
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Timestamp = -1
	tp.Partitions = append(tp.Partitions, p)
	req.Topics = append(req.Topics, tp)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	part := resp.Topics[0].Partitions[0]
	return part.Offset, kerr.ErrorForCode(part.ErrorCode)
}

// TestFaultsFailRetriable fails two Produce requests with a retriable
// error: the client retries, the record is written once.
func TestFaultsFailRetriable(t *testing.T) {
	f := brokertest.NewFaults()
	b := brokertest.Fast(t, f.Opt())
	f.Fail(kmsg.Produce, kerr.NotLeaderForPartition.Code, 2)
	cl := client(t, b.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("once")).FirstErr(); err != nil {
		t.Fatalf("produce after two injected failures: %v", err)
	}
	if n := f.Seen(kmsg.Produce); n < 3 {
		t.Fatalf("the broker saw %d Produce requests, want the two failed ones and the retry", n)
	}
	if got := records(t, b.Addr()); len(got) != 1 || got[0] != "once" {
		t.Fatalf("topic holds %q, want [once]", got)
	}
}

// TestFaultsFailFatal fails every Produce with an authorization error,
// which the client reports, until Clear.
func TestFaultsFailFatal(t *testing.T) {
	f := brokertest.NewFaults()
	b := brokertest.Fast(t, f.Opt())
	f.Fail(kmsg.Produce, kerr.TopicAuthorizationFailed.Code, -1)
	cl := client(t, b.Addr(), kgo.RecordRetries(2))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("denied")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce under an injected TOPIC_AUTHORIZATION_FAILED: %v", err)
	}
	f.Clear()
	cl2 := client(t, b.Addr())
	if err := cl2.ProduceSync(ctx, kgo.StringRecord("allowed")).FirstErr(); err != nil {
		t.Fatalf("produce after Clear: %v", err)
	}
	if got := records(t, b.Addr()); len(got) != 1 || got[0] != "allowed" {
		t.Fatalf("topic holds %q, want [allowed]: a failed Produce wrote nothing", got)
	}
}

// TestFaultsDrop drops the connection of the first Produce: the client
// reconnects and the record is written once.
func TestFaultsDrop(t *testing.T) {
	f := brokertest.NewFaults()
	b := brokertest.Fast(t, f.Opt())
	f.Drop(kmsg.Produce, 1)
	cl := client(t, b.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("after-drop")).FirstErr(); err != nil {
		t.Fatalf("produce after a dropped connection: %v", err)
	}
	if n := f.Seen(kmsg.Produce); n < 2 {
		t.Fatalf("the broker saw %d Produce requests, want the dropped one and the retry", n)
	}
	if got := records(t, b.Addr()); len(got) != 1 || got[0] != "after-drop" {
		t.Fatalf("topic holds %q, want [after-drop]", got)
	}
}

// TestFaultsDelay holds Metadata requests far longer than the caller
// waits, then serves them once the rule is used up.
func TestFaultsDelay(t *testing.T) {
	f := brokertest.NewFaults()
	b := brokertest.Fast(t, f.Opt())
	cl := client(t, b.Addr())
	f.Delay(kmsg.Metadata, 10*time.Minute, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("metadata under a 10-minute delay answered: %v", err)
	}
	// The delayed request holds its connection; a new client's is free.
	cl2 := client(t, b.Addr())
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx2, cl2); err != nil {
		t.Fatalf("metadata once the delay rule is used up: %v", err)
	}
}

// TestFaultsRespond answers one DescribeCluster with a
// response the test builds.
func TestFaultsRespond(t *testing.T) {
	f := brokertest.NewFaults()
	b := brokertest.Fast(t, f.Opt())
	cl := client(t, b.Addr())
	f.Respond(kmsg.DescribeCluster, 1, func(kmsg.Request) kmsg.Response {
		r := kmsg.NewPtrDescribeClusterResponse()
		r.ClusterID = "injected"
		return r
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil || resp.ClusterID != "injected" {
		t.Fatalf("DescribeCluster answered %+v, %v; want the injected cluster id", resp, err)
	}
	resp, err = kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil || resp.ClusterID == "injected" {
		t.Fatalf("second DescribeCluster answered %+v, %v; want the broker's own", resp, err)
	}
}
