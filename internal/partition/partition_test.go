package partition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/batch"
)

// TestProducerTableLastUsed checks that the table's last-used entry never
// answers for state that replaceWith (a snapshot loaded), marker (an
// epoch bump) or replay put in the map since.
func TestProducerTableLastUsed(t *testing.T) {
	hdr := func(pid int64, epoch int16, seq int32, records int32) []batch.Header {
		return []batch.Header{{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: records - 1}}
	}
	accept := func(tb *producerTable, hs []batch.Header, base int64) {
		t.Helper()
		if _, dup, err := tb.check(hs, base); err != nil || dup {
			t.Fatalf("check pid %d epoch %d seq %d: dup %v, err %v; want accepted", hs[0].ProducerID, hs[0].ProducerEpoch, hs[0].BaseSequence, dup, err)
		}
	}
	lastSeqOf := func(tb *producerTable, pid int64) (int16, int32) {
		t.Helper()
		for _, p := range tb.active() {
			if p.pid == pid {
				return p.epoch, p.lastSeq
			}
		}
		t.Fatalf("producer %d has no state", pid)
		return 0, 0
	}

	tb := newProducerTable()
	accept(tb, hdr(1, 0, 0, 5), 0)  // sequences 0..4, cached as last used
	accept(tb, hdr(1, 0, 5, 5), 5)  // found through the cache, written back in place
	accept(tb, hdr(2, 0, 0, 1), 10) // another producer takes the cache
	accept(tb, hdr(1, 0, 10, 1), 11)
	if e, s := lastSeqOf(tb, 1); e != 0 || s != 10 {
		t.Fatalf("producer 1: epoch %d last sequence %d; want 0 and 10", e, s)
	}

	// A table rebuilt elsewhere (a snapshot) replaces the map: producer
	// 1 is further along there.
	o := newProducerTable()
	for seq := int32(0); seq < 20; seq++ {
		o.replay(&hdr(1, 0, seq, 1)[0], 0)
	}
	tb.replaceWith(o)
	if _, _, err := tb.check(hdr(1, 0, 11, 1), 12); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("after replaceWith, sequence 11 (the old state's next): %v; want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	accept(tb, hdr(1, 0, 20, 1), 12)

	// A marker at a higher epoch replaces the entry: the producer's next
	// batch starts the new epoch, and the table reports it.
	if ce := tb.coordEpochOf(1); ce != -1 {
		t.Fatalf("coordinator epoch %d before any marker; want -1", ce)
	}
	tb.marker(1, 1, 4, 0)
	accept(tb, hdr(1, 1, 0, 3), 13)
	if e, s := lastSeqOf(tb, 1); e != 1 || s != 2 {
		t.Fatalf("after the marker: epoch %d last sequence %d; want 1 and 2", e, s)
	}
	// The marker's coordinator epoch outlives a new producer epoch.
	accept(tb, hdr(1, 3, 0, 1), 16)
	if ce := tb.coordEpochOf(1); ce != 4 {
		t.Fatalf("coordinator epoch %d after an epoch bump; want the marker's 4", ce)
	}
	tb.marker(1, 3, 5, 0)
	accept(tb, hdr(1, 3, 1, 1), 17)

	// replay of a newer epoch (recovery) replaces the entry too.
	tb.replay(&hdr(1, 4, 0, 1)[0], 0)
	accept(tb, hdr(1, 4, 1, 1), 18)
	if e, s := lastSeqOf(tb, 1); e != 4 || s != 1 {
		t.Fatalf("after replay at epoch 4: epoch %d last sequence %d; want 4 and 1", e, s)
	}
	if ce := tb.coordEpochOf(1); ce != 5 {
		t.Fatalf("coordinator epoch %d after replay; want 5", ce)
	}
}

// TestProducerLastTimestamp: a producer's last timestamp is the max
// timestamp of its last accepted batch or marker, from check, replay and
// marker alike; a rejected or duplicate batch leaves it; a snapshot
// keeps it, and one written before it was kept restores it as -1.
func TestProducerLastTimestamp(t *testing.T) {
	hdr := func(pid int64, seq int32, maxTs int64) []batch.Header {
		return []batch.Header{{ProducerID: pid, BaseSequence: seq, MaxTimestamp: maxTs}}
	}
	lastTs := func(tb *producerTable, pid int64) int64 {
		t.Helper()
		for _, p := range tb.active() {
			if p.pid == pid {
				return p.lastTs
			}
		}
		t.Fatalf("producer %d has no state", pid)
		return 0
	}
	tb := newProducerTable()
	for i, ts := range []int64{1000, 900, 1500} { // the batch's own timestamp, even if older
		if _, dup, err := tb.check(hdr(1, int32(i), ts), int64(i)); err != nil || dup {
			t.Fatalf("batch %d: dup %v, err %v", i, dup, err)
		}
		if got := lastTs(tb, 1); got != ts {
			t.Fatalf("after batch %d: last timestamp %d, want the batch's %d", i, got, ts)
		}
	}
	if _, dup, _ := tb.check(hdr(1, 2, 7000), 3); !dup {
		t.Fatal("a retry of sequence 2 was not a duplicate")
	}
	if _, _, err := tb.check(hdr(1, 9, 8000), 3); err == nil {
		t.Fatal("sequence 9 after 2 was accepted")
	}
	if got := lastTs(tb, 1); got != 1500 {
		t.Fatalf("after a duplicate and a rejected batch: last timestamp %d, want 1500", got)
	}
	tb.marker(1, 1, 0, 2500)
	if got := lastTs(tb, 1); got != 2500 {
		t.Fatalf("after a marker: last timestamp %d, want the marker's 2500", got)
	}
	tb.replay(&hdr(2, 0, 3100)[0], 0)
	if got := lastTs(tb, 2); got != 3100 {
		t.Fatalf("replayed batch: last timestamp %d, want 3100", got)
	}

	// A snapshot body carries last_ts; one without it (older) loads
	// with the timestamp unknown.
	for _, c := range []struct {
		body string
		want int64
	}{
		{`{"version":2,"start":0,"next":4,"max_pid":1,"producers":[{"pid":1,"epoch":0,"batches":[[0,0,0]],"last_ts":1500}],"open":[],"aborted":[]}`, 1500},
		{`{"version":2,"start":0,"next":4,"max_pid":1,"producers":[{"pid":1,"epoch":0,"batches":[[0,0,0]]}],"open":[],"aborted":[]}`, -1},
	} {
		var s producerSnapshot
		if err := json.Unmarshal([]byte(c.body), &s); err != nil {
			t.Fatal(err)
		}
		data, err := encodeSnapshot(&s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeSnapshot(data)
		if err != nil {
			t.Fatal(err)
		}
		rt := newProducerTable()
		got.restore(rt, newTxnIndex())
		if ts := lastTs(rt, 1); ts != c.want {
			t.Fatalf("snapshot %s restored last timestamp %d, want %d", c.body, ts, c.want)
		}
		if _, dup, err := rt.check(hdr(1, 1, 4000), 4); err != nil || dup {
			t.Fatalf("after restore: dup %v, err %v", dup, err)
		}
		if ts := lastTs(rt, 1); ts != 4000 {
			t.Fatalf("after restore and a batch: last timestamp %d, want 4000", ts)
		}
	}
}

// TestSnapshotFormat: a snapshot file round-trips; a changed byte, a
// missing header or another version is refused.
func TestSnapshotFormat(t *testing.T) {
	s := &producerSnapshot{Version: 2, Start: 3, Next: 40, MaxPID: 9,
		Producers: []snapshotProducer{{PID: 9, Epoch: 1, Batches: [][3]int64{{0, 4, 3}, {5, 9, 20}}}},
		Open:      []snapshotOpen{{PID: 9, First: 30}},
		Aborted:   []snapshotAborted{{PID: 9, First: 10, Last: 15}}}
	data, err := encodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", *s) {
		t.Fatalf("decoded %+v, encoded %+v", *got, *s)
	}
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x04
		if d, err := decodeSnapshot(bad); err == nil && fmt.Sprintf("%+v", *d) != fmt.Sprintf("%+v", *s) {
			t.Fatalf("byte %d changed: decoded a different snapshot %+v", i, *d)
		}
	}
	if _, err := decodeSnapshot(data[bytes.IndexByte(data, '\n')+1:]); err == nil {
		t.Fatal("a body without its header line decoded")
	}
	s.Version = 1
	if data, err = encodeSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeSnapshot(data); err == nil {
		t.Fatal("version 1 decoded as a version 2 file")
	}
}
