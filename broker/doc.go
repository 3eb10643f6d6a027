// Package broker is Sluice's Kafka wire-protocol server: a single-node,
// Kafka-compatible broker that a Go program or test can embed, and that
// `sluice serve` runs.
//
//	b, err := broker.New(broker.DataDir("./data"), broker.ListenAddr("127.0.0.1:9092"))
//	if err != nil { ... }
//	if err := b.Start(); err != nil { ... }
//	defer b.Close()
//
// Any Kafka client can then produce to and consume from b.Addr(). Every
// acks=all reply means the records were fsynced (Fsync, FsyncAlways);
// many appends share each fsync, so this costs little throughput. In
// process, AppendBatch appends without a network round trip and
// CreateTopic creates a topic; Info, Topics, Groups and Stats describe
// the broker for consoles and tests. Package brokertest starts one per
// test.
//
// # Requests
//
// Each client connection has a read loop and a writer goroutine that
// answers in request order. A Produce queues every partition's append,
// then the read loop reads the next request while the produce waits for
// its fsync, so a pipelining producer's requests share group commits and
// keep their order per partition. A request that cannot be served in
// Kafka's terms (unknown API key, unsupported version, malformed bytes,
// larger than MaxRequestBytes) closes the connection, as Kafka does;
// errors inside a valid request are answered with Kafka error codes and a
// message. Each api_*.go file opens with the versions it serves and its
// behaviour notes.
//
// # Security
//
// Listeners carry a Kafka security protocol: SSL and SASL_SSL wrap each
// connection in TLS (certificates swapped by ReloadTLS); SASL listeners
// admit only ApiVersions and the SASL APIs until the login succeeds.
// With Authorization on, each API checks Kafka's documented ACL
// operations. Tools in the same process (the web console) use
// SASLEnabled, CheckPassword, LoginFailed, Allowed and InternalConn.
//
// # Faults
//
// New takes the data directory's lock and Close releases it: a second
// broker on the same directory fails at once, naming the holder's pid. A
// disk monitor refuses produce with KAFKA_STORAGE_ERROR below a
// free-space watermark (DiskLowWatermark). A partition whose write or
// fsync fails anyway heals by itself once the disk works. DeleteTopics
// and CreatePartitions answer truthfully under faults; partial steps are
// undone or completed at the next start.
//
// The design (data flow, packages, on-disk formats, invariants) is in
// docs/architecture.md; the lock order in docs/lockorder.md.
package broker
