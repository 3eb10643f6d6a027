// Package mirror copies topics, records and consumer-group offsets from
// one Kafka-compatible cluster to another: Sluice to Kafka or Redpanda
// when a user outgrows one node, a production cluster into a local Sluice
// for development, or Sluice to Sluice.
//
// Run plans the topics (creating missing target topics with the source's
// partition count and topic configs, refusing a target topic with fewer
// partitions), then copies every record to the same partition number with
// its key, value, headers and timestamp, in order.
//
// Exactly once. The copy position (the next source offset of every
// partition) is stored on the target as the committed offsets of a group
// named after the mirror (Config.Name), with the target offset reached in
// the commit's metadata. Where every target broker supports transactions
// (InitProducerID, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit
// and EndTxn in ApiVersions), each batch of records and its position are
// committed in one transaction: a killed mirror leaves either both or
// neither. Otherwise the mirror writes with an idempotent producer and
// commits the position after the records; on restart the records written
// after the last position (the target's end offset past the stored target
// offset) are counted and that many source records are skipped, so the
// restart neither repeats nor loses records. Before counting, a restart
// waits until the target's end offsets stay put for half a second, so the
// writes a killed run still had in flight have landed; a write delayed
// longer than that would be copied twice, which only transactions rule
// out. Both modes assume the mirror is the only writer to the target
// partitions.
//
// Records are produced as they are polled (franz-go batches them) and a
// batch commits with its positions at 10,000 records (Config.MaxBatch),
// 8 MiB, 100 ms, when the source has nothing more for now, or before each
// progress tick.
//
// Group offsets. For each source group, the committed offset of every
// mirrored partition is translated to the target offset of the first
// record at or after it (offsets differ where transaction markers or
// compaction left gaps), once the mirror has copied past it, and written
// to the target only while the group has never had members there (once
// consumers run on the target, the group's offsets there are theirs).
// Offsets inside what this run copied come from its offset map; older
// ones (copied by an earlier run) are found by content: the source record
// at the offset, looked up on the target from its timestamp. A group is
// written whole or not at all.
package mirror
