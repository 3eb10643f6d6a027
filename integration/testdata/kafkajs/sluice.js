// Drives kafkajs against a Sluice broker for the integration tests.
// Usage: node sluice.js COMMAND '{"brokers":["host:port"],...}'
// Results are JSON lines on stdout; kafkajs's own log goes to stderr.
// Any error exits with status 1 after printing it (with its type and
// Kafka error code when kafkajs gives one) on stderr.
'use strict'
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')
const readline = require('readline')

const [cmd, rawArgs] = process.argv.slice(2)
const args = JSON.parse(rawArgs || '{}')
const kafka = new Kafka({
  clientId: 'sluice-kafkajs',
  brokers: args.brokers,
  logLevel: logLevel.WARN,
  retry: { retries: 5, initialRetryTime: 100 },
  logCreator: () => ({ namespace, level, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`kafkajs ${namespace} ${level}: ${message} ${JSON.stringify(extra)}\n`)
  }
})
const out = obj => process.stdout.write(JSON.stringify(obj) + '\n')
const headersOf = m => {
  const h = {}
  for (const [k, v] of Object.entries(m.headers || {})) h[k] = v.toString()
  return h
}

// produce: writes args.records ({key,value,headers}) to args.topic,
// partition 0, with acks=-1 and args.compression (none|gzip), in batches
// of args.batch records, and prints each send's metadata.
async function produce () {
  const codec = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }[args.compression]
  if (codec === undefined) throw new Error(`unknown compression ${args.compression}`)
  const producer = kafka.producer({ idempotent: !!args.idempotent, maxInFlightRequests: args.idempotent ? 1 : undefined })
  await producer.connect()
  try {
    for (let i = 0; i < args.records.length; i += args.batch) {
      const messages = args.records.slice(i, i + args.batch).map(r => ({ partition: 0, key: r.key, value: r.value, headers: r.headers }))
      const meta = await producer.send({ topic: args.topic, acks: -1, compression: codec, messages })
      out({ sent: messages.length, meta })
    }
  } finally {
    await producer.disconnect()
  }
}

// consume: a consumer in group args.group reads args.topic from the
// beginning until it has args.count records, printing each one.
async function consume () {
  const consumer = kafka.consumer({ groupId: args.group, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
  let n = 0
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, e => reject(e.payload.error))
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        out({ partition, offset: message.offset, key: message.key && message.key.toString(), value: message.value.toString(), headers: headersOf(message) })
        if (++n >= args.count) resolve()
      }
    }).catch(reject)
  })
  await consumer.disconnect()
}

// member: one member of group args.group on args.topic. It prints
// {"event":"assigned"} with its partitions at each join, each record,
// and {"event":"committed"} with the offsets kafkajs commits; it leaves
// the group and exits when its standard input closes.
async function member () {
  const consumer = kafka.consumer({ groupId: args.group, maxWaitTimeInMs: 200, sessionTimeout: 10000, heartbeatInterval: 500, rebalanceTimeout: 10000 })
  consumer.on(consumer.events.GROUP_JOIN, e => out({ event: 'assigned', memberId: e.payload.memberId, partitions: e.payload.memberAssignment[args.topic] || [] }))
  consumer.on(consumer.events.COMMIT_OFFSETS, e => out({ event: 'committed', topics: e.payload.topics }))
  let crashed
  const stopped = new Promise((resolve) => {
    consumer.on(consumer.events.CRASH, e => { crashed = e.payload.error; resolve() })
    readline.createInterface({ input: process.stdin }).on('close', resolve)
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ partition, message }) => out({ event: 'record', partition, offset: message.offset, value: message.value.toString() })
  })
  await stopped
  if (crashed) throw crashed
  await consumer.disconnect()
  out({ event: 'stopped' })
}

// admin: the admin client's topic, group and offset calls in order; a member of
// args.group consumes args.count records of the new topic (which the
// test's Go side fills while the script waits on standard input) so
// that fetchOffsets and describeGroups have something to show.
async function admin () {
  const a = kafka.admin()
  await a.connect()
  const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]()
  try {
    out({ step: 'createTopics', result: await a.createTopics({ waitForLeaders: true, topics: [{ topic: args.topic, numPartitions: 3 }] }) })
    out({ step: 'createTopicsAgain', result: await a.createTopics({ topics: [{ topic: args.topic, numPartitions: 3 }] }) })
    out({ step: 'createPartitions', result: await a.createPartitions({ topicPartitions: [{ topic: args.topic, count: 4 }] }) || null })
    out({ step: 'describeCluster', result: await a.describeCluster() })
    out({ step: 'listTopics', result: await a.listTopics() })
    out({ step: 'fetchTopicMetadata', result: await a.fetchTopicMetadata({ topics: [args.topic] }) })
    out({ step: 'fetchTopicOffsets', result: await a.fetchTopicOffsets(args.topic) })
    await lines.next() // the test has produced args.count records

    const consumer = kafka.consumer({ groupId: args.group, maxWaitTimeInMs: 200 })
    await consumer.connect()
    await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
    let n = 0
    await new Promise((resolve, reject) => {
      consumer.on(consumer.events.CRASH, e => reject(e.payload.error))
      // kafkajs commits after each batch: the commit that follows the
      // last record covers every partition's offsets.
      consumer.on(consumer.events.COMMIT_OFFSETS, () => { if (n >= args.count) resolve() })
      consumer.run({ eachMessage: async () => { n++ } }).catch(reject)
    })
    out({ step: 'fetchOffsets', result: await a.fetchOffsets({ groupId: args.group, topics: [args.topic] }) })
    out({ step: 'describeGroups', result: await a.describeGroups([args.group]) })
    out({ step: 'listGroups', result: await a.listGroups() })
    await consumer.disconnect()
    out({ step: 'describeGroupsAfterLeave', result: await a.describeGroups([args.group]) })
    out({ step: 'fetchTopicOffsetsByTimestamp', result: await a.fetchTopicOffsetsByTimestamp(args.topic, Date.now() + 3600000) })
    await a.setOffsets({ groupId: args.group, topic: args.topic, partitions: [{ partition: 0, offset: '1' }] })
    out({ step: 'fetchOffsetsAfterSet', result: await a.fetchOffsets({ groupId: args.group, topics: [args.topic] }) })
    await a.resetOffsets({ groupId: args.group, topic: args.topic, earliest: true })
    out({ step: 'fetchOffsetsAfterReset', result: await a.fetchOffsets({ groupId: args.group, topics: [args.topic] }) })
    out({ step: 'deleteGroups', result: await a.deleteGroups([args.group]) })
    out({ step: 'listGroupsAfterDelete', result: await a.listGroups() })
    out({ step: 'deleteTopics', result: await a.deleteTopics({ topics: [args.topic] }) })
    out({ step: 'listTopicsAfterDelete', result: await a.listTopics() })
  } finally {
    await a.disconnect()
  }
}

// configs: describeConfigs of args.topic and, when args.alter is set,
// alterConfigs of its retention.ms to args.retention and describeConfigs
// again.
async function configs () {
  const a = kafka.admin()
  await a.connect()
  try {
    const TOPIC = 2
    const describe = () => a.describeConfigs({ resources: [{ type: TOPIC, name: args.topic }], includeSynonyms: false })
    out({ step: 'describeConfigs', result: await describe() })
    if (!args.alter) return
    out({ step: 'alterConfigs', result: await a.alterConfigs({ resources: [{ type: TOPIC, name: args.topic, configEntries: [{ name: 'retention.ms', value: String(args.retention) }] }] }) })
    out({ step: 'describeConfigsAfter', result: await describe() })
  } finally {
    await a.disconnect()
  }
}

// txn: a transactional producer runs args.transactions in order, each
// {values, commit, offsets}: it sends values to partition 0 of
// args.topic, adds offsets (partition 0 of args.topic for group
// args.group) to the transaction when given, then commits or aborts.
async function txn () {
  const producer = kafka.producer({ transactionalId: args.transactionalId, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  try {
    for (const { values, commit, offset } of args.transactions) {
      const t = await producer.transaction()
      try {
        await t.send({ topic: args.topic, acks: -1, messages: values.map(value => ({ partition: 0, value })) })
        if (offset !== undefined) {
          await t.sendOffsets({ consumerGroupId: args.group, topics: [{ topic: args.topic, partitions: [{ partition: 0, offset: String(offset) }] }] })
        }
        if (commit) await t.commit(); else await t.abort()
      } catch (e) {
        await t.abort().catch(() => {})
        throw e
      }
      out({ step: commit ? 'commit' : 'abort', count: values.length })
    }
  } finally {
    await producer.disconnect()
  }
}

// deleteRecords: deleteTopicRecords of partition 0 of args.topic below
// args.offset, then the partition's offsets.
async function deleteRecords () {
  const a = kafka.admin()
  await a.connect()
  try {
    // deleteTopicRecords looks the leaders up in metadata it does not load.
    await a.fetchTopicMetadata({ topics: [args.topic] })
    await a.deleteTopicRecords({ topic: args.topic, partitions: [{ partition: 0, offset: String(args.offset) }] })
    out({ step: 'fetchTopicOffsets', result: await a.fetchTopicOffsets(args.topic) })
  } finally {
    await a.disconnect()
  }
}

// acls: createAcls of one ACL allowing args.principal to read args.topic,
// then describeAcls of the topic.
async function acls () {
  const { AclResourceTypes: R, AclOperationTypes: O, AclPermissionTypes: P, ResourcePatternTypes: T } = require('kafkajs')
  const a = kafka.admin()
  await a.connect()
  try {
    const acl = { resourceType: R.TOPIC, resourceName: args.topic, resourcePatternType: T.LITERAL, principal: args.principal, host: '*', operation: O.READ, permissionType: P.ALLOW }
    out({ step: 'createAcls', result: await a.createAcls({ acl: [acl] }) })
    out({ step: 'describeAcls', result: await a.describeAcls({ resourceType: R.TOPIC, resourceName: args.topic, resourcePatternType: T.LITERAL, operation: O.ANY, permissionType: P.ANY }) })
  } finally {
    await a.disconnect()
  }
}

const commands = { produce, consume, member, admin, configs, txn, deleteRecords, acls }
if (!commands[cmd]) {
  process.stderr.write(`usage: node sluice.js ${Object.keys(commands).join('|')} JSON\n`)
  process.exit(2)
}
commands[cmd]().then(() => process.exit(0), e => {
  process.stderr.write(`kafkajs ${cmd} failed: ${e && e.name}: ${e && e.message} type=${e && e.type} code=${e && e.code}\n${e && e.stack}\n`)
  process.exit(1)
})
