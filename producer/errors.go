package producer

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrClosed is returned by Produce and Flush once Close has been
	// called. The input was not accepted.
	ErrClosed = errors.New("producer: closed")

	// ErrNoCapacity is returned by an Aggregator's TryPush when the input
	// does not fit in the batch being built. The producer then flushes that
	// batch and pushes the input again into the next, empty one.
	ErrNoCapacity = errors.New("producer: no capacity in the current batch")

	// ErrTooLarge reports an input that cannot fit even in an empty batch.
	// Produce returns it when an empty aggregator answers ErrNoCapacity; an
	// aggregator may also return it (wrapped or not) from TryPush.
	ErrTooLarge = errors.New("producer: input too large for one batch")
)

// PanicError is a recovered panic. It is wrapped in an AggregatorError or a
// SinkError, so errors.As(err, &pe) finds it behind either.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the panicking goroutine's stack
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error, so errors.Is sees
// through panic(err).
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// AggregatorError is an error returned by, or a panic raised in, an
// Aggregator or a StatusDeaggregator. Op says which call failed: "push"
// fails only the input being pushed, "flush" fails every input of the
// batch being flushed, "deaggregate" fails only the input whose status was
// being computed.
type AggregatorError struct {
	Op  string // "push", "flush" or "deaggregate"
	Err error  // what the aggregator returned, or a *PanicError
}

func (e *AggregatorError) Error() string {
	return fmt.Sprintf("producer: aggregator %s: %v", e.Op, e.Err)
}

func (e *AggregatorError) Unwrap() error { return e.Err }

// SinkError is an error returned by, or a panic raised in, a Sink. It fails
// every input of the batch the sink was writing, and no other.
type SinkError struct {
	Records int   // how many records the failed batch held
	Err     error // what the sink returned, or a *PanicError
}

func (e *SinkError) Error() string {
	return fmt.Sprintf("producer: sink failed a batch of %d records: %v", e.Records, e.Err)
}

func (e *SinkError) Unwrap() error { return e.Err }
