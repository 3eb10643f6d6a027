// Package broker is Sluice's Kafka wire-protocol server: a single-node,
// Kafka-compatible broker that a Go program or test can embed, and that
// `sluice serve` runs.
//
//	b, err := broker.New(broker.DataDir("./data"), broker.ListenAddr("127.0.0.1:9092"))
//	if err != nil { ... }
//	if err := b.Start(); err != nil { ... }
//	defer b.Close()
//
// # Requests
//
// Each client connection has a read loop and a writer goroutine that
// answers in request order. Most requests are served on the read loop
// one at a time, as Kafka serves a connection. A Produce is the
// exception: the read loop queues every partition's append with its
// acceptor, then reads the next request while the produce waits for its
// fsync, so a pipelining producer's requests share group commits and
// keep their order per partition (conn.go). Requests are decoded with kmsg and dispatched through a table
// that each api_*.go file fills from its init function with
// register(key, minVersion, maxVersion, handler); ApiVersions answers
// from the same table. Each api_*.go file opens with the versions it
// serves and its behaviour. A request that cannot be served in Kafka's
// terms (unknown API key, unsupported version, malformed bytes, larger
// than MaxRequestBytes) closes the connection, as Kafka does; errors
// inside a valid request are answered with Kafka error codes.
//
// # Writes and reads
//
// Each partition is a storage.Log written only by its acceptor goroutine
// (internal/acceptor). Produce validates batches (validate.go), hands
// them to the acceptor, whose Request.Check runs the idempotent-producer
// checks (producers.go) serialized with offset assignment, and answers
// acks=all only once the acceptor reports the records fsynced. Fetch
// reads below the high watermark and streams whole stored batches to the
// socket with sendfile (api_fetch.go).
//
// # Security
//
// Listeners (security.go) carry a security protocol: SSL and SASL_SSL
// wrap each connection in crypto/tls (certificates swapped by
// ReloadTLS), SASL listeners admit only ApiVersions and the SASL APIs
// until the exchange (api_sasl.go, over internal/auth's credential
// store) succeeds. With Authorization on, handlers check what apiACLs
// (authz.go) declares for their API, Kafka's documented table, through
// request.allowed; authz_test.go holds the table and fails for an API
// without a declaration.
//
// Tools embedded in the same process (the web console) use embedded.go:
// SASLEnabled, CheckPassword and LoginFailed for their own login, Allowed
// for ACL decisions, and InternalConn, a net.Pipe connection served like
// any other but as InternalPrincipal, outside ACLs and listener security.
//
// # Faults
//
// New takes the data directory's lock (<data>/LOCK) and Close releases
// it: a second broker on the same directory fails at once, naming the
// holder's pid. A disk monitor refuses produce with KAFKA_STORAGE_ERROR
// below a free-space watermark (disk.go, DiskLowWatermark). A partition
// whose write or fsync fails anyway heals by itself once the disk works
// (its acceptor recovers the log; Config.Recovered rebuilds its
// idempotent-producer state). DeleteTopics and CreatePartitions answer
// truthfully under faults; partial steps are undone or completed at the
// next start (topics.go).
//
// # Lock order
//
// Broker.adminMu (topic and partition changes, producer-id blocks; held
// across their file I/O), then Broker.mu (topic map, connection set,
// listeners), then conn.mu (a connection's idle flag).
// Broker.diskMu (the disk-check channel) is taken alone; tlsState.mu,
// authFailures.mu and the locks of internal/auth's stores are leaves:
// nothing else is taken while they are held.
// Locks of the packages below (acceptor, storage, groups) are taken only
// inside their calls and never call back into the broker while held,
// except groups' PartitionExists, which takes Broker.mu shared.
package broker
