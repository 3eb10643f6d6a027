// Package meta owns the layout of a Sluice data directory: every path
// under it is built here, and the small JSON files that describe the
// cluster, the broker and each topic are read and written here (through
// vfs.WriteFileAtomic, so each replaces atomically and durably).
//
// The data directory:
//
//	LOCK                                 held by the one process that owns the directory (broker or `sluice repair`)
//	cluster.json                         cluster id and the reserved producer-id block (Cluster)
//	broker.json                          dynamic broker configs, AlterConfigs on broker 0 or "" (Broker)
//	client-metrics.json                  client telemetry subscriptions, CLIENT_METRICS configs (ClientMetrics)
//	group-configs.json                   configs of GROUP resources, by group (GroupConfigs)
//	quotas.json                          client quotas, AlterClientQuotas (package quota encodes it)
//	topics/<name>/topic.json             a topic's id, partition count and configs (Topic)
//	topics/<name>/<partition>/           a partition (package partition):
//	    <base, 20 digits>.log            segment: RecordBatch v2 bytes as produced (package storage)
//	    <base>.index, <base>.timeindex   sparse offset and time indexes
//	    checkpoint, log-start-offset     the clean-shutdown checkpoint and the log start offset
//	    cleaner-checkpoint, *.cleaned    compaction's progress and its swap files
//	    producers-<next, 20 digits>.snapshot  producer-state snapshots
//	groups/                              the group coordinator's log (package kvlog)
//	transactions/                        the transaction coordinator's log (package kvlog)
//	security/                            SCRAM credentials, ACLs and delegation tokens (package auth)
//	wal/                                 the write-ahead log shared by the partitions and the coordinators (package wal)
//	deleted/<name>.<topic id>/           topics being deleted (removed at start)
//
// A topic directory without topic.json is an interrupted creation and is
// removed at start; partition directories numbered at or past the
// partition count in topic.json are an interrupted CreatePartitions and
// are removed too. Every metadata file is written to <name>.tmp,
// fsynced, renamed into place, and its directory fsynced
// (vfs.WriteFileAtomic); every directory is created with its parent
// fsynced (vfs.MkdirAllDurable).
package meta
