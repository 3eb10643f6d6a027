package producer

// RecordsNotKept, embedded in a Sink that wraps one keeping nothing of
// b.Records once Produce returns (KafkaSink), lets the producer reuse
// batches' record slices through the wrapper as it would with the
// wrapped sink: the benchmarks' flush counters wrap KafkaSink.
type RecordsNotKept struct{}

func (RecordsNotKept) recordsNotKept() {}

// KeepsNoRecords reports whether the producer reuses the record slices
// it hands s (the sink promises to keep none of them).
func KeepsNoRecords(s Sink) bool {
	_, ok := s.(recordsNotKept)
	return ok
}
