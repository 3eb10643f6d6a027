package broker

import (
	"context"
	"encoding/binary"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

// BenchmarkProduceRoundTrip sends one acks=1 Produce of a 10-record batch
// on one connection and reads its response, one request at a time: the
// allocations per request of the broker's connection and produce path
// (the client side here reuses its buffers).
func BenchmarkProduceRoundTrip(b *testing.B) {
	tb := startTest(b)
	const topic = "bench-rt"
	if err := tb.b.CreateTopic(context.Background(), topic, 1, nil); err != nil {
		b.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = storagetest.Build(storagetest.Spec{Records: 10, ValueSize: 100, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	f := frame(req, 1, "bench")
	c := dialRaw(b, tb.addr)
	resp := make([]byte, 0, 4096)
	roundTrip := func() {
		c.send(f)
		var size [4]byte
		if _, err := io.ReadFull(c.nc, size[:]); err != nil {
			b.Fatal(err)
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c.nc, resp[:n]); err != nil {
			b.Fatal(err)
		}
	}
	roundTrip()
	b.ReportAllocs()
	for b.Loop() {
		roundTrip()
	}
}
