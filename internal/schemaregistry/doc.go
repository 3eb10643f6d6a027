// Package schemaregistry is Sluice's schema registry: Confluent's REST
// API (the paths, status codes, error bodies and media type that
// Confluent's serializers, franz-go's sr, kafkajs's and librdkafka's
// clients use), served by `sluice serve --schema-registry ADDR` from the
// broker's own process, with its state in the broker.
//
// # Storage
//
// The state is the compacted, one-partition topic _schemas, in the key
// and value JSON of Confluent's registry (records.go draws them), so
// that a Confluent registry pointed at the topic, or `sluice mirror`
// copying it to a cluster, takes over with the same subjects, versions
// and ids. At start the registry writes a NOOP record and reads the
// topic from its start up to that record's offset, applying each
// record; the in-memory state (state.go) is then answered from.
//
// Every change is one write of its records with acks=all through an
// idempotent producer, answered only when the broker has made it
// durable (fsynced under --fsync always), and applied to the state
// after that. Changes are serialized (Registry.wmu): the checks a
// change makes (compatibility, the next id and version) and its write
// happen as one step, so two registrations cannot take one id. An id
// is one above the highest id the topic holds, soft- and hard-deleted
// schemas included, so ids are unique across restarts and kill -9: an
// acknowledged registration is in the log, and one that was written
// but not acknowledged still counts when the log is read again. (A
// hard-deleted schema's records are tombstoned; once compaction has
// removed them and their tombstones, after delete.retention.ms, a
// restart no longer sees that id, as Confluent's registry does not.)
// The registry assumes it is the topic's only writer while it runs;
// records others write are seen at the next start.
//
// How it reaches the broker: through franz-go clients whose Dialer is
// broker.InternalConn, a Kafka connection served in process over
// net.Pipe as the broker itself. The registry thus uses the broker's
// own produce and fetch paths, the same acks=all durability and the
// same compaction, without a listener, TLS or SASL of its own and
// without any internal type in the broker's public API; ACLs do not
// apply to that connection, the registry applies them to its HTTP
// users instead (auth.go).
//
// # Schema types
//
// AVRO (hamba/avro), PROTOBUF (bufbuild/protocompile, with the
// well-known types built in) and JSON (santhosh-tekuri/jsonschema),
// each in its file with the compatibility rules it follows. A schema is
// stored in a canonical form (insignificant whitespace removed; with
// normalize=true also object keys sorted, or for Protobuf comments and
// layout removed); the same type, canonical text and references get the
// same id in every subject.
//
// # Compatibility levels
//
// NONE, BACKWARD (the default), BACKWARD_TRANSITIVE, FORWARD,
// FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, per subject or global
// (compat.go); modes READWRITE, READONLY and IMPORT (registrations
// keep the id and version they give, without a compatibility check).
//
// Routes (Confluent's):
//
//	GET    /subjects                                   ?deleted=true, ?subjectPrefix=
//	GET    /subjects/{s}/versions                      ?deleted=true
//	POST   /subjects/{s}/versions                      register; ?normalize=true
//	GET    /subjects/{s}/versions/{v}[/schema]         v a number, latest or -1; ?deleted=true
//	GET    /subjects/{s}/versions/{v}/referencedby
//	DELETE /subjects/{s}/versions/{v}                  ?permanent=true after a soft delete
//	POST   /subjects/{s}                               lookup; ?deleted=true
//	DELETE /subjects/{s}                               ?permanent=true after a soft delete
//	GET    /schemas                                    ?subjectPrefix=, ?deleted=true, ?latestOnly=true
//	GET    /schemas/types
//	GET    /schemas/ids/{id}[/schema|/subjects|/versions]
//	GET|PUT|DELETE /config[/{s}]                       GET ?defaultToGlobal=true
//	GET|PUT|DELETE /mode[/{s}]                         PUT IMPORT ?force=true
//	POST   /compatibility/subjects/{s}/versions[/{v}]  ?verbose=true
//
// Left out: schema contexts, metadata and rule sets (accepted and
// ignored in a request), data-encryption keys, exporters.
package schemaregistry
