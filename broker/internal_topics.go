package broker

// The internal topic __consumer_offsets: a projection of the group
// coordinator's log (internal/groups), readable with Fetch and
// ListOffsets like any topic, for the tools that read group commits
// from it (Burrow, lag exporters).
//
// The coordinator keeps its own durable log, in Kafka's __consumer_offsets
// key and value formats (OffsetCommitKey/Value, GroupMetadataKey/Value),
// and recovers from it; the topic is a copy. At each start the broker
// opens (creating it the first time) a one-partition topic
// __consumer_offsets with cleanup.policy=compact and appends to it the
// coordinator's live records as replayed (the latest value of every key),
// then every record the coordinator makes durable, in order, after it is
// durable. Offsets only grow; a restart appends the live records again,
// and compaction keeps the latest of each key. A crash can lose the last
// records appended to the copy (it is written with acks=1), never the
// coordinator's: the next start appends them again; a tombstone lost that
// way leaves the deleted key's older value in the copy until the key is
// written again.
//
// Clients may not produce to it (INVALID_TOPIC_EXCEPTION, as Kafka), nor
// delete it or add partitions. __transaction_state, whose coordinator
// keeps its own format, is not listed and cannot be created.

import (
	"context"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/kvlog"
	"github.com/sluicedb/sluice/internal/partition"
)

// offsetsTopic is the topic the group coordinator's records are copied to.
const offsetsTopic = "__consumer_offsets"

// offsetsBatchRecords bounds the records of one batch of the copy.
const offsetsBatchRecords = 500

// offsetsProjection queues the coordinator's records for the copy. Its
// goroutine, run, is started by Broker.start once the coordinator is open
// and counted in Broker.wg; it appends the records to the topic and
// returns when the broker stops (stopCtx), before Close waits on wg.
type offsetsProjection struct {
	b *Broker

	mu        sync.Mutex              // guards the fields below; a leaf lock (the coordinator calls watch under its own)
	replaying bool                    // the coordinator is replaying: records go to live
	live      map[string]kvlog.Record // latest record of each key while replaying
	order     []string                // keys of live, by first appearance
	queue     []kvlog.Record          // to append, in order
	wake      chan struct{}           // a buffered signal that queue has records
}

func newOffsetsProjection(b *Broker) *offsetsProjection {
	return &offsetsProjection{b: b, replaying: true, live: map[string]kvlog.Record{}, wake: make(chan struct{}, 1)}
}

// watch is the coordinator's groups.Watcher.
func (o *offsetsProjection) watch(recs []kvlog.Record, replayed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range recs {
		if !kafkaOffsetsKey(r.Key) {
			continue
		}
		c := kvlog.Record{Key: slices.Clone(r.Key), Value: slices.Clone(r.Value)}
		if r.Value == nil {
			c.Value = nil
		}
		if replayed || o.replaying {
			if _, ok := o.live[string(c.Key)]; !ok {
				o.order = append(o.order, string(c.Key))
			}
			o.live[string(c.Key)] = c
			continue
		}
		o.queue = append(o.queue, c)
	}
	if !o.replaying && len(o.queue) > 0 {
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
}

// kafkaOffsetsKey reports whether key is one of the key versions Kafka's
// tools decode from __consumer_offsets: 0 and 1 (OffsetCommitKey) and 2
// (GroupMetadataKey). The coordinator's consumer-protocol (KIP-848)
// records use key versions of Sluice's own with JSON values; they stay
// out of the copy, so that no tool mistakes them for Kafka's.
func kafkaOffsetsKey(key []byte) bool {
	if len(key) < 2 {
		return false
	}
	v := int16(key[0])<<8 | int16(key[1])
	return v >= 0 && v <= 2
}

// replayed ends the replay: the live records (tombstones left out) go
// first in the queue.
func (o *offsetsProjection) replayed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	var first []kvlog.Record
	for _, k := range o.order {
		if r := o.live[k]; r.Value != nil {
			first = append(first, r)
		}
	}
	o.queue = append(first, o.queue...)
	o.live, o.order, o.replaying = nil, nil, false
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take removes up to offsetsBatchRecords queued records.
func (o *offsetsProjection) take() []kvlog.Record {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := min(len(o.queue), offsetsBatchRecords)
	out := slices.Clone(o.queue[:n])
	o.queue = o.queue[n:]
	if len(o.queue) == 0 {
		o.queue = nil
	}
	return out
}

// run appends queued records to the topic until the broker stops.
func (o *offsetsProjection) run(ctx context.Context) {
	defer o.b.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		}
		for {
			recs := o.take()
			if len(recs) == 0 {
				break
			}
			if err := o.append(ctx, recs); err != nil {
				if ctx.Err() == nil {
					o.b.cfg.logger.Warn("copying group coordinator records to "+offsetsTopic+" failed; they are copied again at the next start", "records", len(recs), "err", err)
				}
				if ctx.Err() != nil {
					return
				}
			}
		}
	}
}

// append writes recs as one batch to partition 0 of the topic, waiting
// until it is written (acks=1).
func (o *offsetsProjection) append(ctx context.Context, recs []kvlog.Record) error {
	t := o.b.lookup(offsetsTopic)
	if t == nil || len(t.parts) == 0 {
		return errCode(kerr.UnknownTopicOrPartition, "%s does not exist", offsetsTopic)
	}
	p := t.parts[0]
	now := timeNowMs()
	br := make([]batch.Record, len(recs))
	for i, r := range recs {
		br[i] = batch.Record{Timestamp: now, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	params := batch.Params{}.NoProducer()
	raw, err := batch.Append(nil, &params, br)
	if err != nil {
		return err
	}
	hs, n, err := validateBatches(nil, raw, t.conf.maxMessageBytes)
	if err != nil {
		return err
	}
	pend, err := o.b.enqueue(ctx, p, raw, hs, n, false, new(partition.Append))
	if err != nil {
		return err
	}
	_, err = p.Wait(ctx, pend)
	return err
}

// openOffsetsTopic opens __consumer_offsets, creating it the first time,
// and returns the projection to watch the group coordinator with.
func (b *Broker) openOffsetsTopic() (*offsetsProjection, error) {
	if b.lookup(offsetsTopic) == nil {
		_, err := b.createTopicAs(offsetsTopic, 1, map[string]string{"cleanup.policy": "compact"}, false, true)
		if err != nil && b.lookup(offsetsTopic) == nil {
			return nil, err
		}
	}
	return newOffsetsProjection(b), nil
}

// userTopics is sortedTopics without the internal topics: what the
// embedding API (Topics, Info) and the console show.
func (b *Broker) userTopics() []*topic {
	return slices.DeleteFunc(b.sortedTopics(), func(t *topic) bool { return isInternalTopic(t.name) })
}
