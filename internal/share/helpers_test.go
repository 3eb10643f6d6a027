package share

import (
	"errors"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var topicID = [16]byte{1, 2, 3}

// memLog is an in-memory partition log of uncompressed batches.
type memLog struct {
	mu      sync.Mutex
	batches [][]byte
	firsts  []int64
	next    int64
	start   int64
	aborted map[int64]bool // batch base offsets of aborted transactions
	lso     int64          // -1: the high watermark
}

func newMemLog() *memLog { return &memLog{lso: -1, aborted: map[int64]bool{}} }

// add appends a batch of n records (control: a control batch,
// txn: a transactional one).
func (l *memLog) add(t testing.TB, n int, control, txn bool) int64 {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{OffsetDelta: int32(i), Value: []byte{byte(l.next + int64(i))}}
	}
	p := batch.Params{}.NoProducer()
	if txn || control {
		p.ProducerID, p.ProducerEpoch, p.Transactional, p.Control = 7, 0, true, control
	}
	b, err := batch.Append(nil, &p, recs)
	if err != nil {
		t.Fatal(err)
	}
	base := l.next
	batch.SetBaseOffset(b, base)
	l.batches, l.firsts = append(l.batches, b), append(l.firsts, base)
	l.next += int64(n)
	return base
}

func (l *memLog) StartOffset() int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.start }
func (l *memLog) HighWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}
func (l *memLog) LastStableOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lso >= 0 {
		return l.lso
	}
	return l.next
}
func (l *memLog) AbortedBatch(h *batch.Header) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.aborted[h.BaseOffset]
}

// OffsetForTime: the test log's records are timestamped 1000 ms times
// their batch's base offset.
func (l *memLog) OffsetForTime(ms int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.firsts {
		if f*1000 >= ms {
			return f, nil
		}
	}
	return -1, nil
}

func (l *memLog) Read(offset int64, committed bool, maxBytes int) ([]byte, error) {
	limit := l.HighWatermark()
	if committed {
		limit = l.LastStableOffset()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []byte
	for i, b := range l.batches {
		h, _ := batch.ParseHeader(b)
		if h.LastOffset() < offset || l.firsts[i] >= limit {
			continue
		}
		if len(out) > 0 && len(out)+len(b) > maxBytes {
			break
		}
		out = append(out, b...)
	}
	if out == nil && offset > l.next {
		return nil, errors.New("offset out of range")
	}
	return out, nil
}

// memLogs is one topic "t" of one partition.
type memLogs struct{ l *memLog }

func (m memLogs) Topics() map[string]TopicInfo {
	return map[string]TopicInfo{"t": {ID: topicID, Partitions: 1}}
}

func (m memLogs) Log(tp TP) (Log, string, bool) {
	if tp.Topic != topicID || tp.Partition != 0 {
		return nil, "", false
	}
	return m.l, "t", true
}

func (m memLogs) Watch([]TP) (<-chan struct{}, func()) { return nil, func() {} }

func openTest(t testing.TB, fs vfs.FS, l *memLog, s Settings) *Coordinator {
	t.Helper()
	if s.AutoOffsetReset == "" {
		s.AutoOffsetReset = "earliest"
	}
	c, err := Open(Config{FS: fs, Dir: "/share", Logs: memLogs{l}, Settings: s})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return c
}

func join(t testing.TB, c *Coordinator, member string) {
	t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, "g", member, []string{"t"}
	if r := c.Heartbeat(Client{}, hb); r.ErrorCode != 0 {
		t.Fatalf("join %s: %d %v", member, r.ErrorCode, deref(r.ErrorMessage))
	}
}

type ack struct {
	first, last int64
	typ         AckType
}

// fetch sends a ShareFetch of member at epoch with acks, acquiring up
// to max records without waiting; it returns the acquired ranges and
// the acknowledgement error code.
func fetch(t testing.TB, c *Coordinator, member string, epoch int32, max int32, acks ...ack) ([]Range, int16) {
	t.Helper()
	f := kmsg.NewPtrShareFetchRequest()
	f.Version, f.GroupID, f.MemberID, f.ShareSessionEpoch, f.MaxRecords = 2, kmsg.StringPtr("g"), kmsg.StringPtr(member), epoch, max
	f.ShareAcquireMode = 1
	p := kmsg.ShareFetchRequestTopicPartition{Partition: 0}
	for _, a := range acks {
		p.AcknowledgementBatches = append(p.AcknowledgementBatches, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: a.first, LastOffset: a.last, AcknowledgeTypes: []int8{int8(a.typ)}})
	}
	f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{p}}}
	r := c.Fetch(t.Context(), f, nil, nil)
	if r.ErrorCode != 0 {
		t.Fatalf("fetch: %d %v", r.ErrorCode, deref(r.ErrorMessage))
	}
	var out []Range
	var code int16
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("fetch partition: %d %v", p.ErrorCode, deref(p.ErrorMessage))
			}
			code = p.AcknowledgeErrorCode
			for _, a := range p.AcquiredRecords {
				out = append(out, Range{a.FirstOffset, a.LastOffset, a.DeliveryCount})
			}
		}
	}
	return out, code
}

// acknowledge sends a ShareAcknowledge and returns its partition error.
func acknowledge(t testing.TB, c *Coordinator, member string, epoch int32, acks ...ack) int16 {
	t.Helper()
	a := kmsg.NewPtrShareAcknowledgeRequest()
	a.Version, a.GroupID, a.MemberID, a.ShareSessionEpoch = 2, kmsg.StringPtr("g"), kmsg.StringPtr(member), epoch
	p := kmsg.ShareAcknowledgeRequestTopicPartition{Partition: 0}
	for _, x := range acks {
		p.AcknowledgementBatches = append(p.AcknowledgementBatches, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: x.first, LastOffset: x.last, AcknowledgeTypes: []int8{int8(x.typ)}})
	}
	a.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{p}}}
	r := c.Acknowledge(a)
	if r.ErrorCode != 0 {
		t.Fatalf("acknowledge: %d %v", r.ErrorCode, deref(r.ErrorMessage))
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

// offsets expands ranges to offset → delivery count.
func offsets(rs []Range) map[int64]int16 {
	m := map[int64]int16{}
	for _, r := range rs {
		for o := r.First; o <= r.Last; o++ {
			m[o] = r.Count
		}
	}
	return m
}
