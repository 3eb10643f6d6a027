// Drives @kafkajs/confluent-schema-registry against Sluice's schema
// registry for the integration tests: for each schema type it registers
// a schema, encodes a value with it, produces the bytes to Sluice with
// kafkajs, then consumes the topic and decodes every record with the
// schema the registry gives for the id in it.
// Usage: node sluice_sr.js '{"brokers":["host:port"],"registry":"http://host:port","topic":"t"}'
// Results are JSON lines on stdout.
'use strict'
const { Kafka, logLevel } = require('kafkajs')
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry')

const args = JSON.parse(process.argv[2] || '{}')
const out = obj => process.stdout.write(JSON.stringify(obj) + '\n')
const kafka = new Kafka({ clientId: 'sluice-kafkajs-sr', brokers: args.brokers, logLevel: logLevel.WARN, retry: { retries: 5, initialRetryTime: 100 } })
const registry = new SchemaRegistry({ host: args.registry })

const schemas = [
  {
    type: SchemaType.AVRO,
    schema: JSON.stringify({ type: 'record', name: 'Point', namespace: 'ex', fields: [{ name: 'x', type: 'int' }, { name: 'label', type: 'string' }] }),
    value: { x: 1, label: 'avro' }
  },
  {
    type: SchemaType.PROTOBUF,
    schema: 'syntax = "proto3";\npackage ex;\nmessage Point {\n  int32 x = 1;\n  string label = 2;\n}\n',
    value: { x: 2, label: 'protobuf' }
  },
  {
    type: SchemaType.JSON,
    schema: JSON.stringify({ type: 'object', properties: { x: { type: 'integer' }, label: { type: 'string' } }, required: ['x', 'label'] }),
    value: { x: 3, label: 'json' }
  }
]

async function main () {
  const producer = kafka.producer()
  await producer.connect()
  for (const s of schemas) {
    const subject = `kafkajs-${s.type.toLowerCase()}-value`
    const { id } = await registry.register({ type: s.type, schema: s.schema }, { subject })
    const again = await registry.register({ type: s.type, schema: s.schema }, { subject })
    const latest = await registry.getLatestSchemaId(subject)
    const encoded = await registry.encode(id, s.value)
    await producer.send({ topic: args.topic, acks: -1, messages: [{ partition: 0, value: encoded }] })
    out({ step: 'registered', type: s.type, subject, id, again: again.id, latest, magic: encoded[0], encodedId: encoded.readInt32BE(1) })
  }
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: 'kafkajs-sr', maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
  let n = 0
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, e => reject(e.payload.error))
    consumer.run({
      eachMessage: async ({ message }) => {
        const decoded = await registry.decode(message.value)
        out({ step: 'decoded', offset: message.offset, x: decoded.x, label: decoded.label })
        if (++n >= schemas.length) resolve()
      }
    }).catch(reject)
  })
  await consumer.disconnect()
}

main().then(() => process.exit(0), e => {
  process.stderr.write(`kafkajs schema registry failed: ${e && e.name}: ${e && e.message}\n${e && e.stack}\n`)
  process.exit(1)
})
