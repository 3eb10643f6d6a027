package storagetest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/batch"
)

func TestMakeBatchValidates(t *testing.T) {
	cases := []struct {
		records, valueSize int
		ts                 int64
	}{
		{1, 0, 0},
		{1, 100, 1000},
		{10, 1024, 1_700_000_000_000},
		{300, 7, -5},
	}
	for _, c := range cases {
		b := MakeBatch(c.records, c.valueSize, c.ts)
		h, err := batch.Validate(b)
		if err != nil {
			t.Fatalf("%+v: Validate: %v", c, err)
		}
		if err := h.CheckCount(); err != nil {
			t.Fatalf("%+v: CheckCount: %v", c, err)
		}
		if h.Size() != len(b) || int(h.NumRecords) != c.records || h.BaseTimestamp != c.ts ||
			h.MaxTimestamp != c.ts+int64(c.records)-1 || h.ProducerID != -1 {
			t.Fatalf("%+v: header %+v (len %d)", c, h, len(b))
		}
		// An independent decoder (kmsg) must read the same records back.
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("%+v: kmsg ReadFrom: %v", c, err)
		}
		recs := rb.Records
		for i := 0; i < c.records; i++ {
			var r kmsg.Record
			if err := r.ReadFrom(recs); err != nil {
				t.Fatalf("%+v: record %d: %v", c, i, err)
			}
			if int(r.OffsetDelta) != i || len(r.Value) != c.valueSize || r.Key != nil {
				t.Fatalf("%+v: record %d = %+v", c, i, r)
			}
			recs = recs[len(r.AppendTo(nil)):]
		}
		if len(recs) != 0 {
			t.Fatalf("%+v: %d trailing bytes after the records", c, len(recs))
		}
	}
}

func TestWithBaseOffset(t *testing.T) {
	in := append(MakeBatch(3, 10, 1), MakeBatch(2, 10, 2)...)
	out, next := WithBaseOffset(in, 100)
	if next != 105 {
		t.Fatalf("next = %d, want 105", next)
	}
	var bases []int64
	if _, err := batch.Split(out, func(h batch.Header, _ []byte) error {
		bases = append(bases, h.BaseOffset)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(bases) != 2 || bases[0] != 100 || bases[1] != 103 {
		t.Fatalf("bases = %v", bases)
	}
}
