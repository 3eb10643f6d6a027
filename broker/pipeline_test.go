package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPipelinedRequests sends many requests on one connection without
// waiting: idempotent produce requests with consecutive sequences, with
// other requests between them. Responses must come back in request order
// and every batch must be accepted at consecutive offsets (pipelining
// must not reorder a producer's batches).
func TestPipelinedRequests(t *testing.T) {
	tb := startTest(t)
	if err := tb.b.CreateTopic(t.Context(), "pipe", 1, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, tb.addr)
	pid, _ := initPID(c, -1, -1)
	const n = 40
	var out []byte
	var kinds []int16
	seq := int32(0)
	for i := 0; i < n; i++ {
		var req kmsg.Request
		if i%4 == 3 {
			md := kmsg.NewPtrMetadataRequest()
			md.Version = 9
			req = md
		} else {
			req = produceReq("pipe", -1, idemBatch(pid, 0, seq, 3))
			seq += 3
		}
		kinds = append(kinds, req.Key())
		out = append(out, frame(req, int32(1000+i), "pipe")...)
	}
	c.send(out)
	next := int64(0)
	for i := 0; i < n; i++ {
		corr, body, err := c.readFrame()
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if corr != int32(1000+i) {
			t.Fatalf("response %d has correlation id %d: out of order", i, corr)
		}
		if kinds[i] != kmsg.Produce.Int16() {
			continue
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		if err := resp.ReadFrom(body[1:]); err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != next {
			t.Fatalf("produce %d: code %d offset %d, want offset %d (%s)", i, p.ErrorCode, p.BaseOffset, next, ptrStr(p.ErrorMessage))
		}
		next += 3
	}
	if l := latestOffset(c, "pipe"); l != next {
		t.Fatalf("log end %d, want %d", l, next)
	}
}
