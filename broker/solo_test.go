package broker

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

// TestSoloProduceInlineOnlyWithoutPipelining checks the gate of the lone
// producer's path (conn.soloProduce): acks=all requests sent one at a
// time on a connection are written, fsynced and answered on its read
// loop, while requests pipelined on it are not (each would then wait
// for an fsync of its own, the read loop reading nothing meanwhile),
// and both get their offsets in order.
func TestSoloProduceInlineOnlyWithoutPipelining(t *testing.T) {
	tb := startTest(t)
	const topic = "solo"
	if err := tb.b.CreateTopic(t.Context(), topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	synced := func() int {
		t.Helper()
		var d dto.Metric
		if err := tb.b.accM.InlineSynced.Write(&d); err != nil {
			t.Fatal(err)
		}
		return int(d.GetCounter().GetValue())
	}
	c := dialRaw(t, tb.addr)
	next := int64(0)
	const serial = 40
	for i := range serial {
		p := produceOne(c, topic, storagetest.MakeBatch(1, 100, int64(1000+i)))
		if p.ErrorCode != 0 || p.BaseOffset != next {
			t.Fatalf("produce %d: code %d offset %d, want offset %d", i, p.ErrorCode, p.BaseOffset, next)
		}
		next++
	}
	// The first quietProduces requests open the gate, and the
	// partition's first writes go through the WAL until it writes alone;
	// an append that finds the partition's goroutine busy (writing zeros
	// ahead) is queued. Most of the rest are synced inline.
	alone := synced()
	if alone < serial/2 {
		t.Fatalf("%d of %d requests sent one at a time were fsynced on the read loop", alone, serial)
	}

	// Now pipelined: maxInFlight requests in one write. The first is
	// read with the others buffered behind it, and every later one while
	// earlier responses are owed: none is synced inline (at most the
	// first, had its bytes arrived alone).
	const piped = maxInFlight
	var out []byte
	for i := range piped {
		out = append(out, frame(produceReq(topic, -1, storagetest.MakeBatch(1, 100, int64(2000+i))), int32(100+i), "solo")...)
	}
	c.send(out)
	for i := range piped {
		corr, body, err := c.readFrame()
		if err != nil {
			t.Fatalf("pipelined response %d: %v", i, err)
		}
		if corr != int32(100+i) {
			t.Fatalf("pipelined response %d has correlation id %d: out of order", i, corr)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		if err := resp.ReadFrom(body[1:]); err != nil {
			t.Fatal(err)
		}
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != next {
			t.Fatalf("pipelined produce %d: code %d offset %d, want offset %d", i, p.ErrorCode, p.BaseOffset, next)
		}
		next++
	}
	if got := synced() - alone; got > 1 {
		t.Fatalf("%d of %d pipelined requests were fsynced on the read loop", got, piped)
	}
	if l := latestOffset(c, topic); l != next {
		t.Fatalf("log end %d, want %d", l, next)
	}
}
