package broker

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

func produceReq(topic string, acks int16, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = acks
	req.TimeoutMillis = 10000
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = records
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	return req
}

// produceOne sends one partition's records and returns its result.
func produceOne(c *rawConn, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	resp := c.roundTrip(produceReq(topic, -1, records)).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("produce response shape: %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

func latestOffset(c *rawConn, topic string) int64 {
	c.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	resp := c.roundTrip(req).(*kmsg.ListOffsetsResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		c.t.Fatalf("ListOffsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

func initPID(c *rawConn, pid int64, epoch int16) (int64, int16) {
	c.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.ProducerID, req.ProducerEpoch = pid, epoch
	resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		c.t.Fatalf("InitProducerID: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func idemBatch(pid int64, epoch int16, seq int32, records int) []byte {
	return storagetest.Build(storagetest.Spec{Records: records, ValueSize: 10, Timestamp: 1000 + int64(seq), ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq})
}

// TestIdempotentProducer drives the sequence checks with raw requests: a
// duplicate gets the original offset and writes nothing, a gap and a
// stale epoch get their codes, and all of it holds across a restart.
func TestIdempotentProducer(t *testing.T) {
	tb := startTest(t)
	const topic = "idem"
	if err := tb.b.CreateTopic(context.Background(), topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, tb.addr)
	pid, epoch := initPID(c, -1, -1)
	if pid < 0 || epoch != 0 {
		t.Fatalf("InitProducerID gave %d/%d", pid, epoch)
	}
	other, _ := initPID(c, -1, -1)
	if other == pid {
		t.Fatalf("two producers got id %d", pid)
	}

	type step struct {
		name    string
		restart bool // restart the broker (and reconnect) before the step
		records []byte
		code    *kerr.Error
		offset  int64 // base offset expected when code is nil
		latest  int64 // log end after the step
	}
	steps := []step{
		{name: "first batch", records: idemBatch(pid, 0, 0, 3), offset: 0, latest: 3},
		{name: "duplicate of the first", records: idemBatch(pid, 0, 0, 3), offset: 0, latest: 3},
		{name: "next batch", records: idemBatch(pid, 0, 3, 2), offset: 3, latest: 5},
		{name: "older duplicate in the window", records: idemBatch(pid, 0, 0, 3), offset: 0, latest: 5},
		{name: "gap", records: idemBatch(pid, 0, 10, 1), code: kerr.OutOfOrderSequenceNumber, latest: 5},
		{name: "overlap that is no remembered batch", records: idemBatch(pid, 0, 4, 2), code: kerr.OutOfOrderSequenceNumber, latest: 5},
		{name: "duplicate after restart", restart: true, records: idemBatch(pid, 0, 3, 2), offset: 3, latest: 5},
		{name: "gap after restart", records: idemBatch(pid, 0, 6, 1), code: kerr.OutOfOrderSequenceNumber, latest: 5},
		{name: "next after restart", records: idemBatch(pid, 0, 5, 1), offset: 5, latest: 6},
		{name: "new epoch must start at 0", records: idemBatch(pid, 1, 6, 1), code: kerr.OutOfOrderSequenceNumber, latest: 6},
		{name: "new epoch", records: idemBatch(pid, 1, 0, 1), offset: 6, latest: 7},
		{name: "stale epoch is fenced", records: idemBatch(pid, 0, 6, 1), code: kerr.InvalidProducerEpoch, latest: 7},
		{name: "stale epoch fenced after restart", restart: true, records: idemBatch(pid, 0, 6, 1), code: kerr.InvalidProducerEpoch, latest: 7},
		{name: "unknown producer not at 0", records: idemBatch(other, 0, 4, 1), code: kerr.UnknownProducerID, latest: 7},
		{name: "second producer", records: idemBatch(other, 0, 0, 2), offset: 7, latest: 9},
		{name: "non-idempotent batch", records: storagetest.MakeBatch(2, 5, 50), offset: 9, latest: 11},
	}
	for _, s := range steps {
		if s.restart {
			tb.restart()
			c = dialRaw(t, tb.addr)
		}
		got := produceOne(c, topic, s.records)
		switch {
		case s.code != nil && got.ErrorCode != s.code.Code:
			t.Fatalf("%s: error %v, want %v", s.name, kerr.ErrorForCode(got.ErrorCode), s.code)
		case s.code == nil && got.ErrorCode != 0:
			t.Fatalf("%s: error %v (%v)", s.name, kerr.ErrorForCode(got.ErrorCode), ptrStr(got.ErrorMessage))
		case s.code == nil && got.BaseOffset != s.offset:
			t.Fatalf("%s: base offset %d, want %d", s.name, got.BaseOffset, s.offset)
		}
		if l := latestOffset(c, topic); l != s.latest {
			t.Fatalf("%s: log end %d, want %d", s.name, l, s.latest)
		}
	}

	// Producer ids are never handed out twice, even across restarts.
	tb.restart()
	c = dialRaw(t, tb.addr)
	if next, _ := initPID(c, -1, -1); next <= other {
		t.Fatalf("after restart InitProducerID gave %d, not above %d", next, other)
	}
	// Epoch bump (KIP-360) keeps the id.
	if id, ep := initPID(c, pid, 1); id != pid || ep != 2 {
		t.Fatalf("epoch bump gave %d/%d, want %d/2", id, ep, pid)
	}
}

func ptrStr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
