// kafkajs 2.2 consuming through a consumer group (the only way kafkajs consumes): a
// 2-partition topic gets 20 messages; a consumer in group `kjs-group` reads them all,
// committing each offset (autoCommitThreshold 1) and leaving the group on disconnect; 6 more
// messages; a second consumer in the same group must read only those, from the committed
// offsets. Prints one JSON line: what each read and the group's committed offsets (admin
// fetchOffsets). Exits non-zero on any error.
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic] = process.argv.slice(2)
const groupId = 'kjs-group'
const kafka = new Kafka({ brokers: [bootstrap], logLevel: logLevel.NOTHING, clientId: 'kafkajs-group' })

async function consume (n) {
  const consumer = kafka.consumer({ groupId, sessionTimeout: 6000, heartbeatInterval: 500, rebalanceTimeout: 10000 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const values = []
  await new Promise((resolve, reject) => {
    consumer.run({
      autoCommitThreshold: 1,
      eachMessage: async ({ message }) => {
        values.push(message.value.toString())
        if (values.length === n) resolve()
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  return values
}

;(async () => {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 3 }] })

  const producer = kafka.producer()
  await producer.connect()
  const send = (values) => producer.send({
    topic,
    acks: -1,
    messages: values.map((value, i) => ({ value, partition: i % 2 }))
  })
  await send(Array.from({ length: 20 }, (_, i) => `kjs ${i}`))
  const first = await consume(20)
  await send(Array.from({ length: 6 }, (_, i) => `kjs more ${i}`))
  const second = await consume(6)
  await producer.disconnect()

  const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] })
  await admin.disconnect()
  const committed = {}
  for (const p of offsets.partitions) committed[p.partition] = Number(p.offset)
  console.log(JSON.stringify({ first, second, committed }))
})().catch((e) => {
  console.error('kafkajs failed:', e)
  process.exit(1)
})
