// kafkajs 2.2 across a leader kill (issue 20, point 5), run by
// tests/python/test_failover_clients.py against `purgatory serve --brokers 3`:
//   node kafkajs_failover.js ADMIN_URL TOPIC
// 1. creates TOPIC (1 partition, replication factor 3, min.insync.replicas=2) with the
//    kafkajs admin and waits (GET /api/state) until broker 1 leads it with a full ISR;
// 2. an idempotent producer sends a first batch of 20 records with acks=-1, one send at a
//    time (awaited), as an application would;
// 3. the producer keeps sending a second batch; once 5 of it are acknowledged broker 1 is
//    killed (POST /api/brokers/1/kill) while the next send is under way, and the producer
//    sends 20 more records after the kill has been answered;
// 4. a consumer (kafkajs consumes only through a group, whose coordinator is whichever live
//    broker leads its __consumer_offsets partition: broker 1's partitions of it moved too),
//    bootstrapped on the new leader alone, reads the partition up to its high watermark.
// What kafkajs does on the kill: the socket to broker 1 closes, so the send under way fails
// with KafkaJSConnectionClosedError (retriable) or, if it reached broker 1 between the
// election and the close, NOT_LEADER_OR_FOLLOWER; either makes the producer refresh its
// metadata (from broker 2 or 3, which names the new leader) and retry after the retry
// config's backoff, with the same producer id and sequence number.
// Prints one JSON line: sent, acked [[value, offset]], failed, stored [[offset, value]],
// the kill's answer, the new leader, what kafkajs logged. Exits non-zero on any error;
// every wait has a deadline that names what it waited for.
const { Kafka, Partitioners, logLevel } = require('kafkajs')

const [admin, topic] = process.argv.slice(2)
const FIRST = 20
const BEFORE_KILL = 5
const AFTER_KILL = 20
const groupId = `${topic}-reader`

// kafkajs's warnings and errors; and, from the kill until the first record sent after it
// is acknowledged, its debug lines about connections, metadata and produce requests: what
// it saw of the kill.
const clientLog = []
const killLog = []
let watching = false
const logCreator = () => ({ namespace, level, log }) => {
  const { message, error, broker } = log
  const line = `${namespace}: ${message}${error ? ` (${error})` : ''}${broker ? ` [${broker}]` : ''}`
  if (level <= logLevel.WARN) clientLog.push(line)
  if (watching && killLog.length < 25 && /closed|connect|error|metadata|produce|retry/i.test(line)) {
    killLog.push(`${new Date(log.timestamp).toISOString().slice(17, 23)} ${line}`)
  }
}

async function api (path, method = 'GET') {
  const response = await fetch(admin + path, { method })
  const body = await response.text()
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${body}`)
  return JSON.parse(body)
}

async function waitFor (what, condition, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for: ${typeof what === 'function' ? what() : what}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

async function partition () {
  const state = await api('/api/state')
  return state.partitions.find((p) => p.topic === topic && p.partition === 0)
}

// The retry settings a user would give: a 100 ms first backoff, doubling to at most 2 s.
const retry = { initialRetryTime: 100, maxRetryTime: 2000, retries: 10 }

;(async () => {
  const brokers = await api('/api/brokers')
  const listeners = Object.fromEntries(brokers.map((b) => [b.id, b.listener]))
  const kafka = new Kafka({
    brokers: Object.values(listeners),
    clientId: 'kafkajs-failover',
    logLevel: logLevel.DEBUG, // logCreator keeps the warnings, and the debug lines around the kill
    logCreator,
    retry,
    connectionTimeout: 3000,
    requestTimeout: 10000
  })

  const adm = kafka.admin()
  await adm.connect()
  await adm.createTopics({
    topics: [{ topic, numPartitions: 1, replicationFactor: 3, configEntries: [{ name: 'min.insync.replicas', value: '2' }] }]
  })
  // The reader's group is looked up now (FindCoordinator), which creates __consumer_offsets
  // as any cluster that has had a consumer group has it. Created after the kill, it would
  // not be: like Kafka, the broker refuses offsets.topic.replication.factor=3 on 2 live
  // brokers and answers COORDINATOR_NOT_AVAILABLE until broker 1 is back.
  await adm.describeGroups([groupId])
  await adm.disconnect()
  await waitFor(`${topic} led by broker 1 with a full ISR, and __consumer_offsets replicated`, async () => {
    const state = await api('/api/state')
    const p = state.partitions.find((p) => p.topic === topic && p.partition === 0)
    const offsets = state.partitions.filter((p) => p.topic === '__consumer_offsets')
    return p && p.leader === 1 && JSON.stringify(p.isr) === '[1,2,3]' &&
      offsets.length > 0 && offsets.every((o) => o.isr.length === 3)
  })

  // (a limit on retries makes kafkajs warn that it may invalidate EoS: it is what a user sets)
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, retry, createPartitioner: Partitioners.DefaultPartitioner })
  await producer.connect()
  const sent = []
  const acked = []
  const failed = []
  const send = async (value) => {
    sent.push(value)
    try {
      const [r] = await producer.send({ topic, acks: -1, messages: [{ value, partition: 0 }] })
      acked.push([value, Number(r.baseOffset)])
    } catch (e) {
      failed.push([value, `${e.name}: ${e.message}${e.cause ? ` (cause ${e.cause.name}: ${e.cause.message})` : ''}`])
    }
  }
  for (let i = 0; i < FIRST; i++) await send(`first-${i}`)
  if (acked.length !== FIRST) throw new Error(`first batch: ${JSON.stringify(failed)}`)

  // The second batch, sent while the kill happens.
  let killAnswered = false
  const producing = (async () => {
    let after = 0
    for (let i = 0; after < AFTER_KILL && i < 100000; i++) {
      if (killAnswered) after++
      await send(`second-${i}`)
    }
  })()
  await waitFor(`${BEFORE_KILL} records of the second batch acknowledged`, () => acked.length >= FIRST + BEFORE_KILL)
  watching = true
  const killed = await api('/api/brokers/1/kill', 'POST')
  const unansweredAtKill = sent.length - acked.length - failed.length
  killAnswered = true
  const firstAfterKill = sent.length
  waitFor('a record sent after the kill to be acknowledged', () => acked.length > firstAfterKill, 60000)
    .then(() => { watching = false }, () => { watching = false })
  await producing
  await producer.disconnect()

  const elected = killed.changes.find((c) => c.type === 'leader_elected' && c.tp.topic === topic && c.tp.partition === 0)
  if (!elected) throw new Error(`no election of ${topic}-0 in the kill's answer: ${JSON.stringify(killed)}`)
  const newLeader = elected.new_leader
  const end = (await partition()).high_watermark

  // Read back from the new leader: a group consumer from the beginning.
  const reader = new Kafka({
    brokers: [listeners[newLeader]],
    clientId: 'kafkajs-failover-reader',
    logLevel: logLevel.WARN,
    logCreator,
    retry
  })
  const consumer = reader.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const stored = []
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ message }) => { stored.push([Number(message.offset), message.value.toString()]) }
  })
  await waitFor(() => `${end} records read back from broker ${newLeader} (have ${stored.length})`, () => stored.length >= end, 60000)
  await consumer.disconnect()

  console.log(JSON.stringify({ sent, acked, failed, stored, end, elected, changes: killed.changes, newLeader, unansweredAtKill, clientLog, killLog }))
})().catch((e) => {
  console.error('kafkajs failed:', e)
  console.error('kafkajs logged:\n' + clientLog.join('\n'))
  process.exit(1)
})
