package broker

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

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
