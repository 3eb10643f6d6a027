package broker

import (
	"github.com/sluicedb/sluice/internal/partition"
)

// Traffic is a snapshot of traffic counters, totals since the broker
// (or the partition) was opened.
type Traffic struct {
	RecordsIn  int64 `json:"records_in"`  // records accepted by Produce
	BytesIn    int64 `json:"bytes_in"`    // record-batch bytes accepted by Produce
	RecordsOut int64 `json:"records_out"` // records sent by Fetch
	BytesOut   int64 `json:"bytes_out"`   // record-batch bytes sent by Fetch
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
