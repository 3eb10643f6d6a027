package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
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
		o.replay(&hdr(1, 0, seq, 1)[0])
	}
	tb.replaceWith(o)
	if _, _, err := tb.check(hdr(1, 0, 11, 1), 12); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("after replaceWith, sequence 11 (the old state's next): %v; want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	accept(tb, hdr(1, 0, 20, 1), 12)

	// A marker at a higher epoch replaces the entry: the producer's next
	// batch starts the new epoch, and the table reports it.
	tb.marker(1, 1)
	accept(tb, hdr(1, 1, 0, 3), 13)
	if e, s := lastSeqOf(tb, 1); e != 1 || s != 2 {
		t.Fatalf("after the marker: epoch %d last sequence %d; want 1 and 2", e, s)
	}
	accept(tb, hdr(1, 1, 3, 1), 16)

	// replay of a newer epoch (recovery) replaces the entry too.
	tb.replay(&hdr(1, 2, 0, 1)[0])
	accept(tb, hdr(1, 2, 1, 1), 17)
	if e, s := lastSeqOf(tb, 1); e != 2 || s != 1 {
		t.Fatalf("after replay at epoch 2: epoch %d last sequence %d; want 2 and 1", e, s)
	}
}

// TestProduceTraffic checks the traffic counters a produce request adds
// to (the broker's once per request, each partition's per append): only
// the records of appends that were queued count.
func TestProduceTraffic(t *testing.T) {
	tb := startTest(t)
	if err := tb.b.CreateTopic(context.Background(), "tr", 2, nil); err != nil {
		t.Fatal(err)
	}
	good := storagetest.MakeBatch(5, 20, 1)
	bad := storagetest.MakeBatch(3, 20, 1)
	bad[len(bad)-1] ^= 0xff // the CRC no longer matches: CORRUPT_MESSAGE
	req := produceReq("tr", -1, good)
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 1, bad
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	resp := dialRaw(t, tb.addr).roundTrip(req).(*kmsg.ProduceResponse)
	ps := resp.Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("produce: partition 0 %v, partition 1 %v; want no error and CORRUPT_MESSAGE", kerr.ErrorForCode(ps[0].ErrorCode), kerr.ErrorForCode(ps[1].ErrorCode))
	}
	if tr := tb.b.Stats().Traffic; tr.RecordsIn != 5 || tr.BytesIn != int64(len(good)) {
		t.Fatalf("broker traffic in: %d records, %d bytes; want 5 and %d", tr.RecordsIn, tr.BytesIn, len(good))
	}
	ti, _ := tb.b.Topic("tr")
	if p0, p1 := ti.Partitions[0].Traffic, ti.Partitions[1].Traffic; p0.RecordsIn != 5 || p0.BytesIn != int64(len(good)) || p1.RecordsIn != 0 {
		t.Fatalf("partition traffic in: %+v and %+v", p0, p1)
	}
}
