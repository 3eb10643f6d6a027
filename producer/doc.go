// Package producer is a batching producer for one topic partition of a
// Kafka-compatible log (Sluice, Kafka, Redpanda).
//
// Many goroutines call Produce(ctx, input) at once. Their inputs are
// aggregated into batches under a short mutex, each batch is written to a
// Sink by a background goroutine while the next batch fills, and every
// caller gets back its own status (by default, its record's offset).
//
// # How the pieces interact
//
//	 callers (any number of goroutines)
//	   │ Produce(ctx, in)
//	   ▼
//	┌──────────── engine.mu (held only for the steps inside this box) ─────────┐
//	│  Aggregator.TryPush(in) ──► tag                                          │
//	│    ok                → join engine.cur (the batch being filled)          │
//	│    ErrNoCapacity     → leave the box, seal the full batch, push again    │
//	│  seal: cur = new batch; close(sealed); Aggregator.Flush() ──► records,   │
//	│        deaggregator; hand the records to a send                          │
//	└──────────────────────────────────────────────────────────────────────────┘
//	   │ first caller of a batch             │ every other caller
//	   ▼                                     ▼
//	 linger: wait for Linger, or for       wait on batch.done only: no
//	 every active caller to join           mutex, no timer
//	 (AdaptiveLinger; with 1024
//	 callers or more, half of them;
//	 with every in-flight slot taken,
//	 every caller not waiting on one;
//	 past the Linger while batches
//	 are in flight, until their
//	 callers are back), or
//	 for the batch to be sealed by
//	 someone else; then take an
//	 in-flight slot (MaxInFlight,
//	 if set) and seal it
//	   │                                     ▲
//	   ▼                                     │ close(done): the result is
//	 send (one per batch, several may run    │ broadcast once to every waiter
//	 at once; in the lingering caller's      │
//	 goroutine when its context is never     │
//	 done, else in a goroutine of its own):  │
//	   Sink.Produce(records) ──► offsets ────┘
//	   release the in-flight slot; hand the
//	   records' slice back to a plain
//	   RecordAggregator for reuse
//	   │
//	   ▼
//	 each caller, in its own goroutine:
//	   StatusDeaggregator.Deaggregate(offsets, tag) ──► status
//
// Batch states: filling (engine.cur) → sealed (Aggregator.Flush done, send
// started, listed in engine.inflight) → done (result published).
// Flush seals the current batch at once and waits for every batch in
// flight; Close does the same after refusing new input.
//
// # Failure and cancellation
//
// A panic or an error in TryPush fails only the input being pushed; in
// Flush or in the Sink, only the inputs of that batch; in Deaggregate, only
// that input. The producer keeps working for later inputs. Errors are typed:
// ErrClosed, ErrTooLarge, *AggregatorError, *SinkError, with *PanicError
// behind a recovered panic.
//
// A caller whose context is done returns at once. If its input was already
// in a batch, the batch is still written (so the input may be produced);
// if the caller was the batch's lingerer, a goroutine finishes the linger
// in its place.
//
// # Choosing an aggregator
//
// NewRecordProducer's RecordAggregator writes one Kafka record per input:
// any Kafka consumer reads each input as the record it was produced as, and
// an input's status is its own offset. An aggregator that packs many inputs
// into one record (see the packing example) is faster under heavy
// concurrency, because the client and the broker handle one record instead
// of hundreds, but it changes what is on the topic: only a reader that knows
// the packing can split a record back into inputs, keys, headers and
// timestamps per input are gone, and an input's status is a record offset
// plus a position. That is a choice for the application that owns both
// ends, so it is not the default.
//
// # Sinks
//
// KafkaSink produces through a franz-go client to any Kafka-compatible
// cluster. InProcessSink encodes each batch as one RecordBatch and appends
// it to an embedded Sluice broker without the network. Users may write
// their own Sink.
package producer
