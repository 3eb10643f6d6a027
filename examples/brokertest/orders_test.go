package orders_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/broker/brokertest"
	orders "github.com/sluicedb/sluice/examples/brokertest"
)

func newClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.RecordRetries(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// A leader change (retriable) is ridden out by the client's retries; an
// authorization failure comes back as ErrRejected.
func TestPublishUnderFaults(t *testing.T) {
	faults := brokertest.NewFaults()
	b := brokertest.Fast(t, faults.Opt()) // a real broker on a temp dir, fsync off
	cl := newClient(t, b.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	faults.Fail(kmsg.Produce, kerr.NotLeaderForPartition.Code, 2)
	if err := orders.Publish(ctx, cl, "order-1", "created"); err != nil {
		t.Fatalf("publish through two leader changes: %v", err)
	}

	faults.Fail(kmsg.Produce, kerr.TopicAuthorizationFailed.Code, -1)
	if err := orders.Publish(ctx, cl, "order-1", "paid"); !errors.Is(err, orders.ErrRejected) {
		t.Fatalf("publish without permission: %v, want ErrRejected", err)
	}
	faults.Clear()

	faults.Drop(kmsg.Produce, 1)
	if err := orders.Publish(ctx, cl, "order-1", "paid"); err != nil {
		t.Fatalf("publish through a dropped connection: %v", err)
	}
}
