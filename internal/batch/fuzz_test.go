package batch

import (
	"bytes"
	"testing"
)

// FuzzRecords feeds arbitrary bytes, as the records section of a batch
// with any codec, record count and lastOffsetDelta, to the record
// decoder. It checks:
//   - Records never panics, and fails with a wrapped error rather than
//     reading past the section;
//   - records it accepts number exactly the header's count, with offset
//     deltas increasing and at most lastOffsetDelta;
//   - re-encoding what it decoded (Append with the header's Params, same
//     codec) gives a batch Validate accepts that decodes to the same
//     records: the compaction rewrite loses nothing.
func FuzzRecords(f *testing.F) {
	for _, c := range codecs {
		p := Params{Codec: c}.NoProducer()
		raw, _ := Append(nil, &p, sampleRecords())
		f.Add(raw[HeaderSize:], int8(c), int32(4), int32(5))
	}
	f.Add([]byte{}, int8(0), int32(0), int32(0))
	f.Add([]byte{0x02, 0, 0, 0}, int8(0), int32(1), int32(0))
	f.Fuzz(func(t *testing.T, body []byte, codec int8, count, lastDelta int32) {
		p := Params{Codec: CodecNone, LastOffsetDelta: lastDelta, BaseTimestamp: 1000}.NoProducer()
		raw, err := Append(nil, &p, nil)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw[:HeaderSize], body...)
		h, _ := ParseHeader(raw)
		h.Length = int32(len(raw) - LengthOffset)
		h.Attributes = int16(codec) & AttrCodecMask
		h.NumRecords = count
		var got []Record
		err = Records(&h, raw, func(r *Record) error {
			c := *r
			c.Headers = append([]RecordHeader(nil), r.Headers...)
			got = append(got, c)
			return nil
		})
		if err != nil {
			return
		}
		if len(got) != int(count) {
			t.Fatalf("accepted %d records, header says %d", len(got), count)
		}
		for i := range got {
			if got[i].OffsetDelta > lastDelta || i > 0 && got[i].OffsetDelta <= got[i-1].OffsetDelta {
				t.Fatalf("record %d has offset delta %d (lastOffsetDelta %d)", i, got[i].OffsetDelta, lastDelta)
			}
		}
		rp := ParamsOf(&h)
		out, err := Append(nil, &rp, got)
		if err != nil {
			t.Fatalf("re-encoding decoded records: %v", err)
		}
		nh, err := Validate(out)
		if err != nil {
			t.Fatalf("re-encoded batch invalid: %v", err)
		}
		again, err := DecodeRecords(&nh, out)
		if err != nil || !sameRecords(again, got) {
			t.Fatalf("re-encoded batch decodes to %+v, %v; want %+v", again, err, got)
		}
	})
}

// FuzzAppend encodes records built from arbitrary keys, values, headers
// and timestamps with every codec. It checks that Append's batch passes
// Validate and CheckCount, that DecodeRecords returns the records given,
// and that for uncompressed batches the bytes are identical to franz-go's
// kmsg encoding of the same batch.
func FuzzAppend(f *testing.F) {
	f.Add([]byte("k"), []byte("v"), "h", []byte("hv"), int64(1_700_000_000_000), int64(-5), uint8(3), int8(0), true)
	f.Add([]byte{}, bytes.Repeat([]byte("z"), 300), "", []byte(nil), int64(0), int64(1<<40), uint8(1), int8(4), false)
	f.Fuzz(func(t *testing.T, key, value []byte, hk string, hv []byte, ts, tsStep int64, n uint8, codec int8, nullKey bool) {
		c := Codec(codec & 7)
		if c > CodecZstd {
			c = CodecNone
		}
		if nullKey {
			key = nil
		}
		recs := make([]Record, int(n%8)+1)
		for i := range recs {
			recs[i] = Record{Timestamp: ts + int64(i)*tsStep, OffsetDelta: int32(i), Key: key, Value: value}
			if i%2 == 1 {
				recs[i].Headers = []RecordHeader{{Key: hk, Value: hv}}
			}
		}
		p := Params{Codec: c, ProducerID: 1, ProducerEpoch: 0, BaseSequence: 0}
		raw, err := Append(nil, &p, recs)
		if err != nil {
			t.Fatal(err)
		}
		h, err := Validate(raw)
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if err := h.CheckCount(); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeRecords(&h, raw)
		if err != nil || !sameRecords(got, recs) {
			t.Fatalf("decoded %+v, %v; want %+v", got, err, recs)
		}
		rb, krecs := kmsgDecode(t, raw)
		if len(krecs) != len(recs) {
			t.Fatalf("kmsg reads %d records", len(krecs))
		}
		if c == CodecNone && !bytes.Equal(kmsgEncode(t, &rb, krecs), raw) {
			t.Fatal("bytes differ from kmsg's encoding")
		}
	})
}

// FuzzParseMarker feeds arbitrary bytes to Validate and ParseMarker. It
// checks that neither panics, and that a marker ParseMarker accepts is
// ABORT or COMMIT and encodes back (AppendMarker) to a batch that parses
// to the same marker.
func FuzzParseMarker(f *testing.F) {
	f.Add(AppendMarker(nil, 0, 0, Marker{Type: ControlCommit, ProducerID: 1, CoordinatorEpoch: 3}))
	f.Add(AppendMarker(nil, 9, 1, Marker{Type: ControlAbort, ProducerID: 2, ProducerEpoch: 5, Timestamp: 77}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Validate(b)
		if err != nil {
			return
		}
		m, err := ParseMarker(&h, b)
		if err != nil {
			return
		}
		if m.Type != ControlAbort && m.Type != ControlCommit {
			t.Fatalf("accepted control type %d", m.Type)
		}
		raw := AppendMarker(nil, h.BaseOffset, h.PartitionLeaderEpoch, m)
		nh, err := Validate(raw)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := ParseMarker(&nh, raw); err != nil || again != m {
			t.Fatalf("marker %+v re-encodes to %+v, %v", m, again, err)
		}
	})
}
