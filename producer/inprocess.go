package producer

import (
	"context"
	"fmt"
	"time"
)

// Appender appends whole RecordBatches to a partition of an embedded
// broker; *broker.Broker implements it. batch holds one or more RecordBatch
// v2 with base offset 0 and a valid CRC; AppendBatch returns the base
// offset the broker assigned to the first record.
type Appender interface {
	AppendBatch(ctx context.Context, topic string, partition int32, batch []byte, acks int16) (baseOffset int64, err error)
}

// InProcessSink writes batches to a partition of an embedded broker without
// the network: it encodes each batch as one RecordBatch v2 (compressed with
// the producer's Compression) and appends it. The records of one batch get
// consecutive offsets starting at the returned base offset.
type InProcessSink struct {
	app       Appender
	topic     string
	partition int32
	acks      int16
	enc       encoder
	now       func() time.Time
}

// NewInProcessSink returns a sink appending to topic's partition of app
// with the given acks (-1: wait until durable, like acks=all; 1: once
// written; 0: do not wait).
func NewInProcessSink(app Appender, topic string, partition int32, acks int16) *InProcessSink {
	return &InProcessSink{app: app, topic: topic, partition: partition, acks: acks, now: time.Now}
}

// Produce encodes and appends the batch and returns each record's offset.
func (s *InProcessSink) Produce(ctx context.Context, b Batch) ([]int64, error) {
	raw, err := s.enc.encode(nil, b.Records, b.Compression, s.now().UnixMilli())
	if err != nil {
		return nil, err
	}
	base, err := s.app.AppendBatch(ctx, s.topic, s.partition, raw, s.acks)
	if err != nil {
		return nil, fmt.Errorf("append to %s/%d: %w", s.topic, s.partition, err)
	}
	offsets := make([]int64, len(b.Records))
	for i := range offsets {
		offsets[i] = base + int64(i)
	}
	return offsets, nil
}
