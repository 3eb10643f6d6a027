"""Drives confluent-kafka-python (librdkafka) against a Sluice broker for
the integration tests.

Usage: python3 confluent_kafka_compat.py COMMAND '{"bootstrap":"host:port",...}'
Results are JSON lines on stdout; errors go to stderr with a non-zero exit.
"""
import json
import sys
import threading

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def conf(args, **extra):
    c = {"bootstrap.servers": args["bootstrap"], "client.id": "sluice-confluent-kafka"}
    c.update(extra)
    return c


def produce(args):
    """Writes args.records to partition 0 of args.topic with acks=all and
    idempotence, printing each delivery report."""
    p = Producer(conf(args, **{"acks": "all", "enable.idempotence": True,
                               "compression.type": args.get("compression", "none"),
                               "linger.ms": 5}))
    failed = []

    def report(err, msg):
        if err is not None:
            failed.append(str(err))
            return
        out({"partition": msg.partition(), "offset": msg.offset(), "key": msg.key().decode()})

    for r in args["records"]:
        hdrs = [(k, v.encode()) for k, v in sorted(r["headers"].items())]
        p.produce(args["topic"], value=r["value"].encode(), key=r["key"].encode(),
                  headers=hdrs, partition=0, on_delivery=report)
        p.poll(0)
    left = p.flush(30)
    if left or failed:
        raise RuntimeError("%d undelivered, delivery errors: %s" % (left, failed))


def member(args):
    """One member of group args.group on args.topic, with assignment
    strategy args.strategy: prints the partitions it owns whenever they
    change, each record, and each synchronous
    commit; closes (leaving the group) when standard input closes."""
    c = Consumer(conf(args, **{"group.id": args["group"], "auto.offset.reset": "earliest",
                               "enable.auto.commit": False, "session.timeout.ms": 10000,
                               "heartbeat.interval.ms": 500,
                               "partition.assignment.strategy": args["strategy"]}))
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()

    owned = set()

    def assigned(_, parts):
        owned.update(p.partition for p in parts)
        out({"event": "assigned", "partitions": sorted(owned)})

    def revoked(_, parts):
        owned.difference_update(p.partition for p in parts)
        out({"event": "assigned", "partitions": sorted(owned)})

    c.subscribe([args["topic"]], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    try:
        while not stop.is_set():
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            out({"event": "record", "partition": m.partition(), "offset": m.offset(),
                 "key": m.key().decode() if m.key() is not None else None,
                 "value": m.value().decode(),
                 "headers": {k: v.decode() for k, v in (m.headers() or [])}})
            committed = c.commit(message=m, asynchronous=False)
            for tp in committed:
                if tp.error:
                    raise KafkaException(tp.error)
            out({"event": "committed", "partition": m.partition(), "offset": m.offset() + 1})
    finally:
        c.close()
    out({"event": "stopped"})


def admin(args):
    """AdminClient: create_topics (twice), list_topics, the topic's
    metadata, describe_configs, list_groups, delete_topics."""
    a = AdminClient(conf(args))
    topic = args["topic"]
    fs = a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                   config={"retention.ms": "7200000"})], operation_timeout=10)
    fs[topic].result()
    out({"step": "create_topics", "result": "created"})
    try:
        a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result()
        out({"step": "create_topics_again", "result": "created"})
    except KafkaException as e:
        out({"step": "create_topics_again", "result": e.args[0].name()})
    md = a.list_topics(timeout=10)
    out({"step": "list_topics", "result": sorted(md.topics), "brokers": [b.id for b in md.brokers.values()],
         "controller": md.controller_id})
    t = a.list_topics(topic=topic, timeout=10).topics[topic]
    out({"step": "describe_topic", "error": str(t.error) if t.error else None,
         "partitions": [{"id": p.id, "leader": p.leader, "replicas": p.replicas, "isrs": p.isrs,
                         "error": str(p.error) if p.error else None}
                        for p in sorted(t.partitions.values(), key=lambda p: p.id)]})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = a.describe_configs([res])[res].result()
    out({"step": "describe_configs", "result": {k: v.value for k, v in entries.items()}})
    groups = a.list_groups(timeout=10)
    out({"step": "list_groups", "result": [{"id": g.id, "state": g.state, "protocol_type": g.protocol_type,
                                            "members": len(g.members), "error": str(g.error) if g.error else None}
                                           for g in groups]})
    a.delete_topics([topic], operation_timeout=10)[topic].result()
    out({"step": "delete_topics", "result": "deleted"})
    out({"step": "list_topics_after_delete", "result": sorted(a.list_topics(timeout=10).topics)})


def txn(args):
    """A transactional Producer commits c0,c1,c2, aborts a0,a1, then
    commits c3 with group args.group's offset 3 on partition 0 of
    args.topic (send_offsets_to_transaction)."""
    p = Producer(conf(args, **{"transactional.id": args["transactional_id"]}))
    p.init_transactions(30)
    group = Consumer(conf(args, **{"group.id": args["group"]}))
    for values, commit, offset in ((["c0", "c1", "c2"], True, None), (["a0", "a1"], False, None), (["c3"], True, 3)):
        p.begin_transaction()
        for v in values:
            p.produce(args["topic"], value=v.encode(), partition=0)
        # abort_transaction purges what is still queued: flush so the
        # aborted records reach the log (and read_uncommitted sees them).
        if p.flush(30):
            raise RuntimeError("transactional records not delivered")
        if offset is not None:
            p.send_offsets_to_transaction([TopicPartition(args["topic"], 0, offset)], group.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
        out({"step": "commit" if commit else "abort", "count": len(values)})
    group.close()


COMMANDS = {"produce": produce, "member": member, "admin": admin, "txn": txn}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in COMMANDS:
        sys.stderr.write("usage: confluent_kafka_compat.py %s JSON\n" % "|".join(COMMANDS))
        sys.exit(2)
    try:
        COMMANDS[sys.argv[1]](json.loads(sys.argv[2]))
    except KafkaException as e:
        err = e.args[0]
        if isinstance(err, KafkaError):
            sys.stderr.write("confluent-kafka %s failed: %s (code %s %s)\n" % (sys.argv[1], err.str(), err.code(), err.name()))
        else:
            sys.stderr.write("confluent-kafka %s failed: %r\n" % (sys.argv[1], e))
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - the test prints whatever failed
        sys.stderr.write("confluent-kafka %s failed: %r\n" % (sys.argv[1], e))
        sys.exit(1)
