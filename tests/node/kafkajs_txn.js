// kafkajs 2.2 transactions: a transactional producer commits two records, aborts one and
// commits one more; a consumer with readUncommitted: false reads only the committed three,
// and one with readUncommitted: true all four. Prints one JSON line: what each read.
// Exits non-zero on any error.
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic] = process.argv.slice(2)
const kafka = new Kafka({ brokers: [bootstrap], logLevel: logLevel.NOTHING, clientId: 'kafkajs-txn' })

async function read (groupId, readUncommitted, want) {
  const consumer = kafka.consumer({ groupId, readUncommitted })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  await consumer.run({ eachMessage: async ({ message }) => { got.push(message.value.toString()) } })
  const deadline = Date.now() + 20000
  while (got.length < want && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
  // Anything past `want` would be a record that should not be there: wait for it a moment.
  await new Promise((resolve) => setTimeout(resolve, 1000))
  await consumer.disconnect()
  return got
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 3 }] })
  await admin.disconnect()
  const producer = kafka.producer({ transactionalId: 'kjs-txn-id', maxInFlightRequests: 1, idempotent: true })
  await producer.connect()
  for (const [values, commit] of [[['committed-1', 'committed-2'], true], [['aborted-1'], false], [['committed-3'], true]]) {
    const txn = await producer.transaction()
    await txn.send({ topic, messages: values.map((value) => ({ value, partition: 0 })) })
    await (commit ? txn.commit() : txn.abort())
  }
  await producer.disconnect()
  const committed = await read('kjs-txn-committed', false, 3)
  const uncommitted = await read('kjs-txn-uncommitted', true, 4)
  console.log(JSON.stringify({ committed, uncommitted }))
}

main().catch((e) => { console.error(e); process.exit(1) })
