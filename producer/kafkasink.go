package producer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaSink writes batches to a topic partition of any Kafka-compatible
// cluster (Sluice, Kafka, Redpanda) through a franz-go client.
//
// The client must be built with kgo.RecordPartitioner(kgo.ManualPartitioner())
// so that records go to the sink's partition; a record the client routed
// elsewhere fails its batch. The client batches, compresses
// (kgo.ProducerBatchCompression), retries and, by default, produces
// idempotently, so the offsets returned are those the records were written
// at exactly once. The sink does not own the client and never closes it.
type KafkaSink struct {
	cl        *kgo.Client
	topic     string
	partition int32
	// direct is set when the client does not linger
	// (kgo.ProducerLinger(0)): Produce then hands the records to
	// cl.Produce with a promise of its own and waits for them, which is
	// what ProduceSync does for such a client, without building a result
	// per record. A lingering client goes through ProduceSync, which
	// sends the records without waiting out the linger.
	direct bool

	// A free list rather than a sync.Pool: a pool is emptied by every
	// garbage collection, and with thousands of callers collections are
	// frequent and the kgo records of a batch number thousands.
	mu   sync.Mutex      // guards free
	free []*kafkaScratch // scratch of finished Produce calls, at most maxFreeScratch
}

// maxFreeScratch bounds the scratch a KafkaSink keeps between calls: a few
// batches are written at once.
const maxFreeScratch = 4

// kafkaScratch holds the kgo records of one Produce call. The client is done
// with them once every record's promise has been called (ProduceSync waits
// for that, and so does a direct sink), so they are cleared and reused by
// later calls instead of reallocated.
type kafkaScratch struct {
	krs  []kgo.Record
	ptrs []*kgo.Record

	// For a direct sink: the promise given to every record (sc.done, bound
	// once), the records not yet done, and the first error.
	promise func(*kgo.Record, error)
	wg      sync.WaitGroup
	mu      sync.Mutex // guards err
	err     error
}

// done is the promise of a direct sink's records.
func (sc *kafkaScratch) done(_ *kgo.Record, err error) {
	if err != nil {
		sc.mu.Lock()
		if sc.err == nil {
			sc.err = err
		}
		sc.mu.Unlock()
	}
	sc.wg.Done()
}

// recordsNotKept: Produce copies what it needs of b.Records into kgo
// records of its own.
func (s *KafkaSink) recordsNotKept() {}

// NewKafkaSink returns a sink that produces to topic's partition through cl.
func NewKafkaSink(cl *kgo.Client, topic string, partition int32) *KafkaSink {
	linger, ok := cl.OptValue(kgo.ProducerLinger).(time.Duration)
	return &KafkaSink{cl: cl, topic: topic, partition: partition, direct: ok && linger <= 0}
}

// Produce writes the batch's records and returns each record's offset once
// every one is acknowledged: with one ProduceSync call, or, when the client
// does not linger (kgo.ProducerLinger(0)), with one Produce call per record
// and a promise shared by the batch, which is how ProduceSync produces for
// such a client, without its result per record. The client may send them in more than one request;
// on an error, records of the batch may have been written.
func (s *KafkaSink) Produce(ctx context.Context, b Batch) ([]int64, error) {
	sc := s.getScratch()
	defer s.putScratch(sc)
	if cap(sc.krs) < len(b.Records) {
		sc.krs = make([]kgo.Record, len(b.Records))
		sc.ptrs = make([]*kgo.Record, len(b.Records))
	}
	krs, ptrs := sc.krs[:len(b.Records)], sc.ptrs[:len(b.Records)]
	sc.krs, sc.ptrs = krs, ptrs
	for i := range b.Records {
		r := &b.Records[i]
		kr := &krs[i]
		kr.Topic = s.topic
		kr.Partition = s.partition
		kr.Key = r.Key
		kr.Value = r.Value
		kr.Timestamp = r.Timestamp
		if len(r.Headers) > 0 {
			kr.Headers = make([]kgo.RecordHeader, len(r.Headers))
			for j, h := range r.Headers {
				kr.Headers[j] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
			}
		}
		ptrs[i] = kr
	}
	if err := s.produce(ctx, sc, ptrs); err != nil {
		return nil, err
	}
	offsets := make([]int64, len(krs))
	for i := range krs {
		if krs[i].Partition != s.partition {
			return nil, fmt.Errorf("record %d went to partition %d, not %d: the kgo.Client must use kgo.ManualPartitioner", i, krs[i].Partition, s.partition)
		}
		offsets[i] = krs[i].Offset
	}
	return offsets, nil
}

// produce writes rs and waits until every one is done; it returns the first
// error.
func (s *KafkaSink) produce(ctx context.Context, sc *kafkaScratch, rs []*kgo.Record) error {
	if !s.direct {
		return s.cl.ProduceSync(ctx, rs...).FirstErr()
	}
	if sc.promise == nil {
		sc.promise = sc.done
	}
	sc.err = nil
	sc.wg.Add(len(rs))
	for _, r := range rs {
		s.cl.Produce(ctx, r, sc.promise)
	}
	sc.wg.Wait()
	return sc.err // every promise has returned: no lock needed
}

func (s *KafkaSink) getScratch() *kafkaScratch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		sc := s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
		return sc
	}
	return new(kafkaScratch)
}

func (s *KafkaSink) putScratch(sc *kafkaScratch) {
	clear(sc.krs) // drop references to the caller's keys and values
	clear(sc.ptrs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) < maxFreeScratch {
		s.free = append(s.free, sc)
	}
}
