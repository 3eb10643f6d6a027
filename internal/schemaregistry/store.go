package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
)

// store is the _schemas topic, reached through a Kafka client that
// talks to the broker in process (broker.InternalConn).
type store struct {
	b     *broker.Broker
	topic string
	opts  []kgo.Opt
	cl    *kgo.Client // producer: acks=all, idempotent (kgo's defaults)
}

func (s *store) clientOpts() []kgo.Opt {
	b := s.b
	return append([]kgo.Opt{
		kgo.SeedBrokers("sluice-internal:0"), // not dialed: the Dialer connects in process
		kgo.ClientID("sluice-schema-registry"),
		kgo.Dialer(func(context.Context, string, string) (net.Conn, error) { return b.InternalConn() }),
	}, s.opts...)
}

func openStore(ctx context.Context, b *broker.Broker, topic string, opts []kgo.Opt) (*store, error) {
	s := &store{b: b, topic: topic, opts: opts}
	cl, err := kgo.NewClient(append(s.clientOpts(),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)...)
	if err != nil {
		return nil, err
	}
	s.cl = cl
	// One partition, compacted: Confluent's layout of the topic.
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": ptr("compact")}, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		cl.Close()
		return nil, fmt.Errorf("create topic %s: %w", topic, err)
	}
	return s, nil
}

func ptr[T any](v T) *T { return &v }

// replay reads the topic from its start, calling apply for each record
// in order, up to a NOOP record it writes first: the offset it gets
// back is the end of what was there, even if compaction left holes.
func (s *store) replay(ctx context.Context, apply func(k, v []byte) error) error {
	nk, _, _ := record{key: recordKey{KeyType: keyNoop}}.encode()
	res := s.cl.ProduceSync(ctx, &kgo.Record{Key: nk, Partition: 0})
	noop, err := res.First()
	if err != nil {
		return fmt.Errorf("write a NOOP to %s: %w", s.topic, err)
	}
	end := struct{ Offset int64 }{noop.Offset + 1}
	cl, err := kgo.NewClient(append(s.clientOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: {0: kgo.NewOffset().AtStart()}}),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("read %s: %w", s.topic, ferr)
		}
		done := false
		var aerr error
		fs.EachRecord(func(r *kgo.Record) {
			if aerr == nil {
				aerr = apply(r.Key, r.Value)
			}
			if r.Offset >= end.Offset-1 {
				done = true
			}
		})
		if aerr != nil {
			return aerr
		}
		if done {
			return nil
		}
	}
}

// write produces recs in one batch and returns when the broker has
// made them durable (acks=all: fsynced under --fsync always).
func (s *store) write(ctx context.Context, recs []record) error {
	krs := make([]*kgo.Record, 0, len(recs))
	for _, r := range recs {
		k, v, err := r.encode()
		if err != nil {
			return err
		}
		krs = append(krs, &kgo.Record{Key: k, Value: v, Partition: 0})
	}
	return s.cl.ProduceSync(ctx, krs...).FirstErr()
}

func (s *store) close() { s.cl.Close() }
