"""kafka-python (pure-Python Kafka client) against a Sluice broker.

Usage: kafka_python_compat.py BOOTSTRAP TOPIC GROUP
Prints one JSON object per step on stdout; the Go test checks them.
"""
import json
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

bs, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]


def out(step, **kw):
    kw["step"] = step
    print(json.dumps(kw), flush=True)


def topic_config(adm, name):
    res = adm.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    return {e[0]: e[1] for e in res[0].resources[0][4]}


adm = KafkaAdminClient(bootstrap_servers=bs, client_id="kafka-python-compat")
r = adm.create_topics([NewTopic(topic, 3, 1, topic_configs={"retention.ms": "3600000"})])
out("create_topics", errors=[e[1] for e in r.topic_errors])
out("describe_configs", retention=topic_config(adm, topic).get("retention.ms"))

p = KafkaProducer(bootstrap_servers=bs, acks="all", compression_type="gzip", linger_ms=5)
futs = [p.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x%d" % i)]) for i in range(100)]
p.flush()
metas = [f.get(timeout=30) for f in futs]
p.close()
out("produce", acked=len(metas), partitions=sorted({m.partition for m in metas}))

c = KafkaConsumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False, consumer_timeout_ms=20000)
got = []
for m in c:
    got.append({"p": m.partition, "o": m.offset, "k": m.key.decode(), "v": m.value.decode(),
                "h": [[k, v.decode()] for k, v in m.headers]})
    if len(got) == 100:
        break
c.commit()
c.close()
out("consume", records=got)

out("list_groups", groups=[list(g) for g in adm.list_consumer_groups()])
d = adm.describe_consumer_groups([group])[0]
out("describe_group", error=d.error_code, state=d.state, protocol_type=d.protocol_type)
offs = adm.list_consumer_group_offsets(group)
out("group_offsets", total=sum(o.offset for o in offs.values()))

r = adm.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7200000"})])
out("alter_configs", errors=[x[0] for x in r.resources], retention=topic_config(adm, topic).get("retention.ms"))
r = adm.create_partitions({topic: NewPartitions(4)})
out("create_partitions", errors=[e[1] for e in r.topic_errors], partitions=len(adm.describe_topics([topic])[0]["partitions"]))

c2 = KafkaConsumer(bootstrap_servers=bs)
ends = c2.end_offsets([TopicPartition(topic, i) for i in range(4)])
times = c2.offsets_for_times({TopicPartition(topic, 0): 0})
c2.close()
out("offsets", end_total=sum(ends.values()), partition3_end=ends[TopicPartition(topic, 3)],
    first_by_time=times[TopicPartition(topic, 0)].offset)

r = adm.delete_consumer_groups([group])
out("delete_groups", errors=[e[1].errno for e in r])
r = adm.delete_topics([topic])
out("delete_topics", errors=[e[1] for e in r.topic_error_codes], remaining=[t for t in adm.list_topics() if not t.startswith("__")])
adm.close()
