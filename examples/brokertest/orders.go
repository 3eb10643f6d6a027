// Package orders is a small piece of application code, a function that
// publishes an order event, tested in orders_test.go against a real
// in-process broker with injected faults.
package orders

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrRejected means the cluster refused the event for good (the caller
// should not retry); other errors are worth retrying later.
var ErrRejected = errors.New("order event rejected")

// Publish writes one order event and waits for the broker's ack.
func Publish(ctx context.Context, cl *kgo.Client, id, event string) error {
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte(id), Value: []byte(event)}).FirstErr()
	var ke *kerr.Error
	if errors.As(err, &ke) && !ke.Retriable {
		return fmt.Errorf("%w: %s", ErrRejected, ke.Message)
	}
	return err
}
