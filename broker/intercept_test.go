package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestErrorResponseMirrorsRequest checks the answer an Interceptor's
// ErrorCode builds: the request's topics and partitions, the code in
// every ErrorCode field.
func TestErrorResponseMirrorsRequest(t *testing.T) {
	code := kerr.NotLeaderForPartition.Code
	prod := kmsg.NewPtrProduceRequest()
	prod.SetVersion(9)
	for _, name := range []string{"a", "b"} {
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = name
		for p := int32(0); p < 2; p++ {
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Partition = p
			tp.Partitions = append(tp.Partitions, pp)
		}
		prod.Topics = append(prod.Topics, tp)
	}
	resp := errorResponse(prod, code).(*kmsg.ProduceResponse)
	if resp.GetVersion() != 9 || len(resp.Topics) != 2 {
		t.Fatalf("produce answer: version %d, %d topics", resp.GetVersion(), len(resp.Topics))
	}
	for i, tp := range resp.Topics {
		if tp.Topic != prod.Topics[i].Topic || len(tp.Partitions) != 2 {
			t.Fatalf("produce answer topic %d: %+v", i, tp)
		}
		for j, p := range tp.Partitions {
			if p.Partition != int32(j) || p.ErrorCode != code {
				t.Fatalf("produce answer %s/%d: %+v", tp.Topic, j, p)
			}
		}
	}

	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("orders")
	meta.Topics = append(meta.Topics, mt)
	mresp := errorResponse(meta, kerr.UnknownTopicOrPartition.Code).(*kmsg.MetadataResponse)
	if len(mresp.Topics) != 1 || mresp.Topics[0].Topic == nil || *mresp.Topics[0].Topic != "orders" ||
		mresp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("metadata answer: %+v", mresp.Topics)
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	if r := errorResponse(fc, kerr.CoordinatorNotAvailable.Code).(*kmsg.FindCoordinatorResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("find coordinator answer: %+v", r)
	}
}
