#!/usr/bin/env python3
"""Drives confluent-kafka-python's SchemaRegistryClient and its JSON Schema
serializer against Sluice's schema registry for the integration tests.

Usage: confluent_sr.py '{"bootstrap":"host:port","registry":"http://host:port","topic":"t"}'
Results are JSON lines on stdout; any error exits with status 1.
"""
import json
import sys

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

args = json.loads(sys.argv[1])


def out(**kv):
    print(json.dumps(kv), flush=True)


client = SchemaRegistryClient({"url": args["registry"]})

# Register, fetch, look up, check compatibility, configure: Avro.
avro_v1 = json.dumps({"type": "record", "name": "Reading", "fields": [{"name": "value", "type": "double"}]})
avro_v2 = json.dumps({"type": "record", "name": "Reading", "fields": [
    {"name": "value", "type": "double"}, {"name": "unit", "type": "string", "default": "C"}]})
avro_bad = json.dumps({"type": "record", "name": "Reading", "fields": [{"name": "value", "type": "string"}]})
sid = client.register_schema("readings-value", Schema(avro_v1, "AVRO"))
fetched = client.get_schema(sid)
latest = client.get_latest_version("readings-value")
looked = client.lookup_schema("readings-value", Schema(avro_v1, "AVRO"))
out(step="avro", id=sid, fetched_type=fetched.schema_type, fetched_same=json.loads(fetched.schema_str) == json.loads(avro_v1),
    latest_version=latest.version, latest_id=latest.schema_id, lookup_id=looked.schema_id,
    compatible_v2=client.test_compatibility("readings-value", Schema(avro_v2, "AVRO")),
    compatible_bad=client.test_compatibility("readings-value", Schema(avro_bad, "AVRO")))
client.set_compatibility("readings-value", "FULL")
sid2 = client.register_schema("readings-value", Schema(avro_v2, "AVRO"))
out(step="avro2", id=sid2, compatibility=client.get_compatibility("readings-value"),
    versions=client.get_versions("readings-value"), subjects=sorted(client.get_subjects()))
try:
    client.register_schema("readings-value", Schema(avro_bad, "AVRO"))
    out(step="incompatible", registered=True)
except Exception as e:  # SchemaRegistryError
    out(step="incompatible", registered=False, http_status=getattr(e, "http_status_code", None), error_code=getattr(e, "error_code", None))

# JSON Schema serializer round trip through Sluice.
json_schema = json.dumps({"title": "Reading", "type": "object",
                          "properties": {"sensor": {"type": "string"}, "value": {"type": "number"}},
                          "required": ["sensor", "value"]})
ser = JSONSerializer(json_schema, client)
de = JSONDeserializer(json_schema)
topic = args["topic"]
p = Producer({"bootstrap.servers": args["bootstrap"], "acks": "all"})
sent = [{"sensor": "s%d" % i, "value": i * 1.5} for i in range(3)]
for v in sent:
    p.produce(topic, value=ser(v, SerializationContext(topic, MessageField.VALUE)), partition=0)
p.flush(30)
c = Consumer({"bootstrap.servers": args["bootstrap"], "group.id": "confluent-sr", "auto.offset.reset": "earliest"})
c.subscribe([topic])
got = []
while len(got) < len(sent):
    m = c.poll(10)
    if m is None:
        raise SystemExit("no record within 10 s")
    if m.error():
        raise SystemExit(str(m.error()))
    raw = m.value()
    got.append({"id": int.from_bytes(raw[1:5], "big"), "magic": raw[0],
                "value": de(raw, SerializationContext(topic, MessageField.VALUE))})
c.close()
out(step="json", sent=sent, got=got, subject_versions=client.get_versions(topic + "-value"))
