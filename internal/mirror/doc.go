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
// restart neither repeats nor loses records. Both modes assume the mirror
// is the only writer to the target partitions.
//
// Group offsets. For each source group, the committed offset of every
// mirrored partition is translated to the target offset of the first
// record at or after it (offsets differ where transaction markers or
// compaction left gaps), once the mirror has copied past it, and written
// to the target only while the group has no active members there.
package mirror
