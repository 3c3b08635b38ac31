// kafkajs 2.2 — a third, independent implementation of the Kafka protocol — against the
// broker: admin calls (creating the topic with the replication factor given, default 3),
// then an idempotent producer with acks=-1. Prints one JSON line with
// what it saw; exits non-zero on any error. (kafkajs consumes only through a consumer group:
// that is kafkajs_group.js.)
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, replicas = '3'] = process.argv.slice(2)
const replicationFactor = Number(replicas)
const kafka = new Kafka({ brokers: [bootstrap], logLevel: logLevel.NOTHING, clientId: 'kafkajs-check' })

;(async () => {
  const admin = kafka.admin()
  await admin.connect()
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor }] })
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
  await admin.disconnect()

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const offsets = []
  for (let i = 0; i < 20; i++) {
    const [r] = await producer.send({ topic, acks: -1, messages: [{ value: `kafkajs ${i}` }] })
    offsets.push(Number(r.baseOffset))
  }
  await producer.disconnect()

  const admin2 = kafka.admin()
  await admin2.connect()
  const [end] = await admin2.fetchTopicOffsets(topic)
  await admin2.disconnect()
  console.log(JSON.stringify({ created, partition: metadata.topics[0].partitions[0], offsets, high: Number(end.high) }))
})().catch((e) => {
  console.error('kafkajs failed:', e)
  process.exit(1)
})
