package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

// FuzzDecodeRequest feeds arbitrary frames to the request decoder.
// Invariants: it never panics; a frame it accepts names a registered API
// at a version inside its range, and re-encoding the decoded request and
// decoding that again gives the same bytes (the decoder kept everything
// it read).
func FuzzDecodeRequest(f *testing.F) {
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	topic := "t"
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "sluice", "1"
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 11
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{PartitionMaxBytes: 1 << 20}}}}
	for _, r := range []kmsg.Request{md, av, fetch, produceReq("t", -1, storagetest.MakeBatch(2, 3, 4))} {
		f.Add(frame(r, 1, "fuzz")[4:])
	}
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		h, req, err := decodeRequest(in)
		if err != nil {
			return
		}
		e, ok := apis[h.key]
		if !ok || h.version < e.min || h.version > e.max {
			t.Fatalf("accepted key %d v%d outside the table", h.key, h.version)
		}
		if req.Key() != h.key || req.GetVersion() != h.version {
			t.Fatalf("request is key %d v%d, header said %d v%d", req.Key(), req.GetVersion(), h.key, h.version)
		}
		enc := req.AppendTo(nil)
		again := kmsg.RequestForKey(h.key)
		again.SetVersion(h.version)
		if err := again.ReadFrom(enc); err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if !bytes.Equal(again.AppendTo(nil), enc) {
			t.Fatalf("re-encoding is not stable")
		}
	})
}

// FuzzValidateBatches feeds arbitrary record bytes to Produce validation.
// Invariants: it never panics; when it accepts, the bytes are exactly a
// run of whole batches each passing batch.Validate with magic 2, a record
// count equal to lastOffsetDelta+1, no control or transactional bit and a
// size within the limit; the headers returned are those batches' and the
// offset count is their sum.
func FuzzValidateBatches(f *testing.F) {
	f.Add(storagetest.MakeBatch(1, 0, 0), int32(1<<20))
	f.Add(append(storagetest.MakeBatch(3, 10, 5), storagetest.MakeBatch(2, 1, 9)...), int32(1<<20))
	f.Add(storagetest.Build(storagetest.Spec{Records: 2, ValueSize: 3, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 4}), int32(100))
	f.Add([]byte{}, int32(10))
	f.Fuzz(func(t *testing.T, records []byte, max int32) {
		in := bytes.Clone(records)
		hs, n, err := validateBatches(nil, records, max)
		if !bytes.Equal(in, records) {
			t.Fatalf("validation modified its input")
		}
		if err != nil {
			if codeOf(err) == 0 {
				t.Fatalf("rejection without a Kafka code: %v", err)
			}
			return
		}
		var pos int
		var count int64
		for i := 0; pos < len(records); i++ {
			h, err := batch.Validate(records[pos:])
			if err != nil {
				t.Fatalf("accepted bytes hold an invalid batch at %d: %v", pos, err)
			}
			if i >= len(hs) || hs[i] != h {
				t.Fatalf("header %d differs from the batch at %d", i, pos)
			}
			if h.Magic != 2 || h.CheckCount() != nil || h.Control() || h.Transactional() || int64(h.Size()) > int64(max) {
				t.Fatalf("accepted a batch that breaks the rules: %+v", h)
			}
			count += int64(h.LastOffsetDelta) + 1
			pos += h.Size()
		}
		if pos != len(records) || count != n || len(hs) == 0 {
			t.Fatalf("accepted %d bytes as %d batches / %d offsets; walked %d bytes, %d offsets", len(records), len(hs), n, pos, count)
		}
	})
}
