package broker

import (
	"sync/atomic"

	"github.com/sluicedb/sluice/internal/partition"
)

// traffic counts records and bytes accepted by Produce (in) and sent by
// Fetch (out). Records out are the offsets a fetch response covers from
// the fetch offset on (a compacted log's gaps count too).
type traffic struct {
	recordsIn, bytesIn, recordsOut, bytesOut atomic.Int64
}

func (t *traffic) in(records int64, bytes int) {
	t.recordsIn.Add(records)
	t.bytesIn.Add(int64(bytes))
}

func (t *traffic) out(records int64, bytes int) {
	t.recordsOut.Add(records)
	t.bytesOut.Add(int64(bytes))
}

// Traffic is a snapshot of traffic counters, totals since the broker
// (or the partition) was opened.
type Traffic struct {
	RecordsIn  int64 `json:"records_in"`  // records accepted by Produce
	BytesIn    int64 `json:"bytes_in"`    // record-batch bytes accepted by Produce
	RecordsOut int64 `json:"records_out"` // records sent by Fetch
	BytesOut   int64 `json:"bytes_out"`   // record-batch bytes sent by Fetch
}

func (t *traffic) snapshot() Traffic {
	return Traffic{t.recordsIn.Load(), t.bytesIn.Load(), t.recordsOut.Load(), t.bytesOut.Load()}
}

func (t *Traffic) add(o Traffic) {
	t.RecordsIn += o.RecordsIn
	t.BytesIn += o.BytesIn
	t.RecordsOut += o.RecordsOut
	t.BytesOut += o.BytesOut
}

// trafficOf reads a partition's counters.
func trafficOf(t *partition.Traffic) Traffic {
	var o Traffic
	o.RecordsIn, o.BytesIn, o.RecordsOut, o.BytesOut = t.Load()
	return o
}
