package producer

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Opt configures a BatchProducer. Options are built by the functions in
// this file and applied in order by New.
type Opt interface {
	apply(*cfg)
}

type opt struct{ fn func(*cfg) }

func (o opt) apply(c *cfg) { o.fn(c) }

// DefaultMaxBatchBytes is the default MaxBatchBytes: 1,000,000 bytes, under
// both Kafka's default message.max.bytes (1048588) and the older topic
// default max.message.bytes (1000012) that franz-go assumes.
const DefaultMaxBatchBytes = 1_000_000

type cfg struct {
	linger        time.Duration
	adaptive      bool
	maxBatchBytes int
	compression   kgo.CompressionCodec
	maxInFlight   int
	sink          Sink
}

func defaultCfg() cfg {
	return cfg{
		linger:        5 * time.Millisecond,
		adaptive:      true,
		maxBatchBytes: DefaultMaxBatchBytes,
		compression:   kgo.NoCompression(),
	}
}

func (c *cfg) validate() error {
	if c.sink == nil {
		return errors.New("producer: no sink configured (use WithSink)")
	}
	if c.linger < 0 {
		return fmt.Errorf("producer: negative linger %v", c.linger)
	}
	if c.maxBatchBytes < 128 {
		return fmt.Errorf("producer: MaxBatchBytes %d is below the minimum of 128", c.maxBatchBytes)
	}
	if c.maxInFlight < 0 {
		return fmt.Errorf("producer: negative MaxInFlight %d", c.maxInFlight)
	}
	if _, err := kgo.DefaultCompressor(c.compression); err != nil {
		return fmt.Errorf("producer: compression: %w", err)
	}
	return nil
}

// WithSink sets where batches are written. There is no default; New fails
// without a sink.
func WithSink(s Sink) Opt { return opt{func(c *cfg) { c.sink = s }} }

// Linger sets how long the first caller of a batch waits for other inputs
// to join it before flushing it, like Kafka's linger.ms. A batch is flushed
// sooner when it fills up, on Flush, and (with AdaptiveLinger) when every
// caller inside Produce has joined it. Zero flushes every batch as soon as
// its first caller has pushed. Default 5ms.
func Linger(d time.Duration) Opt { return opt{func(c *cfg) { c.linger = d }} }

// AdaptiveLinger, when on, ends a batch's linger as soon as every caller
// currently inside Produce has its input in that batch: nobody else can join
// it, so waiting longer only adds latency. A lone caller's input is
// therefore sent at once (one round trip), while under concurrency batches
// fill as they would without it.
//
// When the Linger passes while inputs of earlier batches are being written,
// at least half as many as the batch holds, the batch keeps filling until
// every caller inside Produce has joined it
// (or it fills, or Flush is called): the callers of the writes in flight
// come back to it once their write is done, instead of finding it gone and
// starting a batch of their own. Under thousands of callers whose writes
// take longer than the Linger, this keeps them in one batch per write
// rather than split into batches that each wait out the timer.
//
// With 1024 callers or more inside Produce, it also ends the linger once the
// batch holds at least half of them and either no batch is in flight or
// every caller not waiting on one has joined it. Such a crowd then forms
// two batches that take turns, one being written while the other fills,
// instead of one batch per write whose next write starts only once every
// caller has been woken and has pushed again; with MaxInFlight unset the
// two are in flight at once (see MaxInFlight for their order). Smaller
// crowds keep one batch per write: halving it cost more client CPU per
// input than the overlap saved.
//
// With MaxInFlight set, it also ends the linger once every in-flight slot is
// taken and every caller not waiting on a batch in flight has joined: the
// batch is then written as soon as a slot is free, and keeps filling until
// then. Under heavy concurrency batches are therefore paced by the writes in
// flight rather than by the Linger timer.
//
// When off, the first caller always waits the full Linger (and then for a
// slot) unless the batch fills or Flush is called. Default on.
func AdaptiveLinger(on bool) Opt { return opt{func(c *cfg) { c.adaptive = on }} }

// MaxBatchBytes bounds the size of one encoded RecordBatch (header and
// records, before compression) built by the RecordAggregator of
// NewRecordProducer; like Kafka's batch.size, it must not exceed the
// broker's message.max.bytes. Custom aggregators enforce their own limits.
// Default DefaultMaxBatchBytes (1,000,000).
func MaxBatchBytes(n int) Opt { return opt{func(c *cfg) { c.maxBatchBytes = n }} }

// Compression sets the codec, like Kafka's compression.type, that sinks
// which encode RecordBatches themselves (InProcessSink) use. KafkaSink
// leaves compression to its kgo.Client (kgo.ProducerBatchCompression).
// Default kgo.NoCompression().
func Compression(codec kgo.CompressionCodec) Opt {
	return opt{func(c *cfg) { c.compression = codec }}
}

// MaxInFlight bounds how many batches may be written to the sink at once,
// like Kafka's max.in.flight.requests.per.connection. When the limit is
// reached, the caller that must flush the next batch blocks (honouring its
// context) and that batch keeps filling until it is full; then later callers
// block too. This is the producer's back-pressure. Zero means unbounded: a
// full batch, or one whose linger has ended, is always flushed at once, and
// AdaptiveLinger ends a linger once every caller inside Produce has joined
// the batch or, with 1024 callers or more, once half of them have (see
// AdaptiveLinger).
// Batches in flight at once may be written in either order (see Sink);
// MaxInFlight(1) writes them one at a time. Default 0.
func MaxInFlight(n int) Opt { return opt{func(c *cfg) { c.maxInFlight = n }} }
