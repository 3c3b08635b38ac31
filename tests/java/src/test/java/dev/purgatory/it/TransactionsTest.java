package dev.purgatory.it;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/*
 * Transactions with the Java client (kafka-clients 4.4): commit and abort as read_committed
 * and read_uncommitted consumers see them, a zombie fenced by a second producer with the
 * same transactional.id, and consume-transform-produce whose group offsets land only with
 * the commit.
 */
class TransactionsTest {
    @RegisterExtension
    static final BrokerExtension cluster = new BrokerExtension(
            new NewTopic("java-txn", 1, (short) 3),
            new NewTopic("java-txn-zombie", 1, (short) 3),
            new NewTopic("java-txn-in", 1, (short) 3),
            new NewTopic("java-txn-out", 1, (short) 3),
            new NewTopic("java-txn-v2", 1, (short) 3));

    private static KafkaProducer<String, String> transactional(String transactionalId) {
        KafkaProducer<String, String> producer = Clients.producer(cluster.broker(), Map.of(
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId,
                ProducerConfig.CLIENT_ID_CONFIG, transactionalId));
        producer.initTransactions();
        return producer;
    }

    /** Every value of partition 0 of {@code topic} at {@code isolation}, until {@code want} are read, then a second more. */
    private static List<String> read(String topic, String isolation, int want) {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap(),
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation,
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false),
                new org.apache.kafka.common.serialization.StringDeserializer(),
                new org.apache.kafka.common.serialization.StringDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 20_000;
            while (values.size() < want && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
            }
            long settle = System.currentTimeMillis() + 1000;
            while (System.currentTimeMillis() < settle) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
            }
        }
        return values;
    }

    @Test
    void commitAndAbortAsReadCommittedAndReadUncommittedSeeThem() {
        try (KafkaProducer<String, String> producer = transactional("java-txn-1")) {
            producer.beginTransaction();
            producer.send(new ProducerRecord<>("java-txn", 0, null, "committed-0"));
            producer.send(new ProducerRecord<>("java-txn", 0, null, "committed-1"));
            producer.commitTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>("java-txn", 0, null, "aborted-0"));
            producer.flush();
            producer.abortTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>("java-txn", 0, null, "after"));
            producer.commitTransaction();
        }
        assertEquals(List.of("committed-0", "committed-1", "after"), read("java-txn", "read_committed", 3));
        assertEquals(List.of("committed-0", "committed-1", "aborted-0", "after"),
                read("java-txn", "read_uncommitted", 4));
    }

    @Test
    void aSecondProducerWithTheSameTransactionalIdFencesTheFirst() {
        KafkaProducer<String, String> zombie = transactional("java-txn-zombie");
        zombie.beginTransaction();
        zombie.send(new ProducerRecord<>("java-txn-zombie", 0, null, "from-the-zombie"));
        zombie.flush();
        try (KafkaProducer<String, String> successor = transactional("java-txn-zombie")) {
            KafkaException fenced = assertThrows(KafkaException.class, zombie::commitTransaction);
            assertTrue(fenced instanceof ProducerFencedException
                            || fenced.getCause() instanceof ProducerFencedException
                            || fenced.getMessage().contains("epoch"),
                    "the zombie is told it was fenced: " + fenced);
            successor.beginTransaction();
            successor.send(new ProducerRecord<>("java-txn-zombie", 0, null, "from-the-successor"));
            successor.commitTransaction();
        } finally {
            zombie.close(Duration.ZERO);
        }
        assertEquals(List.of("from-the-successor"), read("java-txn-zombie", "read_committed", 1));
    }

    @Test
    void aTransactionPastItsTimeoutIsAbortedByTheCoordinator() throws Exception {
        // A broker of its own on a manual clock, checking for expired transactions every second.
        java.nio.file.Path config = java.nio.file.Files.createTempFile("purgatory-txn-timeout", ".toml");
        java.nio.file.Files.writeString(config, java.nio.file.Files.readString(PurgatoryBroker.repoRoot().resolve("config/broker.toml"))
                + "\n\"transaction.abort.timed.out.transaction.cleanup.interval.ms\" = 1000\n");
        try (PurgatoryBroker broker = PurgatoryBroker.start(config, List.of("--clock", "manual"))) {
            KafkaProducer<String, String> producer = Clients.producer(broker, Map.of(
                    ProducerConfig.TRANSACTIONAL_ID_CONFIG, "java-txn-timeout",
                    ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 5000));
            try {
                producer.initTransactions();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>("java-txn-late", 0, null, "left-open")).get();
                try (KafkaProducer<String, String> plain = Clients.producer(broker, Map.of())) {
                    plain.send(new ProducerRecord<>("java-txn-late", 0, null, "after-it")).get();
                }
                assertEquals(0, broker.partition("java-txn-late", 0).path("last_stable_offset").asLong(),
                        "the open transaction holds the LSO");
                broker.advanceClock(7000);
                Wait.until("the coordinator's abort to replicate",
                        () -> broker.partition("java-txn-late", 0).path("last_stable_offset").asLong() == 3);
                assertThrows(KafkaException.class, producer::commitTransaction, "the timed-out producer is fenced");
            } finally {
                producer.close(Duration.ZERO);
            }
            List<String> values = new ArrayList<>();
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(Map.of(
                    ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrap(),
                    ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                    ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false),
                    new org.apache.kafka.common.serialization.StringDeserializer(),
                    new org.apache.kafka.common.serialization.StringDeserializer())) {
                TopicPartition tp = new TopicPartition("java-txn-late", 0);
                consumer.assign(List.of(tp));
                consumer.seekToBeginning(List.of(tp));
                long deadline = System.currentTimeMillis() + 20_000;
                while (values.isEmpty() && System.currentTimeMillis() < deadline) {
                    consumer.poll(Duration.ofMillis(200)).forEach(r -> values.add(r.value()));
                }
            }
            assertEquals(List.of("after-it"), values, "only the record after the aborted transaction");
        } finally {
            java.nio.file.Files.deleteIfExists(config);
        }
    }

    /** kafka-transactions.sh, run in its own JVM as the tools run. */
    private static KafkaTool.Result transactionsTool(String name, String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", cluster.bootstrap()));
        all.addAll(List.of(args));
        return KafkaTool.run(name, "org.apache.kafka.tools.TransactionsCommand", all, 120);
    }

    /** The transactional id's producer epoch, as the coordinator describes it. */
    private static int epochOf(String transactionalId) throws Exception {
        try (org.apache.kafka.clients.admin.Admin admin = Clients.admin(cluster.broker())) {
            return admin.describeTransactions(List.of(transactionalId)).description(transactionalId).get().producerEpoch();
        }
    }

    @Test
    void underTransactionVersion2EveryTransactionEndsWithANewEpoch() throws Exception {
        // The broker finalizes transaction.version 2, so this client adds its partitions
        // through Produce v12 (no AddPartitionsToTxn) and EndTxn v5 moves the epoch on.
        try (KafkaProducer<String, String> producer = transactional("java-txn-v2")) {
            int initial = epochOf("java-txn-v2");
            producer.beginTransaction();
            producer.send(new ProducerRecord<>("java-txn-v2", 0, null, "one"));
            producer.commitTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>("java-txn-v2", 0, null, "dropped"));
            producer.flush();
            producer.abortTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>("java-txn-v2", 0, null, "two"));
            producer.commitTransaction();
            assertEquals(initial + 3, epochOf("java-txn-v2"), "one epoch per transaction ended");
        }
        assertEquals(List.of("one", "two"), read("java-txn-v2", "read_committed", 2));
    }

    @Test
    void kafkaTransactionsListsDescribesAndShowsTheProducersOfAnOpenTransaction() throws Exception {
        KafkaProducer<String, String> open = transactional("java-txn-tool");
        try {
            open.beginTransaction();
            open.send(new ProducerRecord<>("java-txn", 0, null, "left-open")).get();
            KafkaTool.Result listed = transactionsTool("transactions-list", "list");
            assertEquals(0, listed.exitCode(), listed.describe());
            assertTrue(listed.stdout().stream().anyMatch(l -> l.contains("java-txn-tool") && l.contains("Ongoing")),
                    "list shows the open transaction: " + listed.stdout());
            KafkaTool.Result described = transactionsTool("transactions-describe", "describe",
                    "--transactional-id", "java-txn-tool");
            assertEquals(0, described.exitCode(), described.describe());
            String row = String.join("\n", described.stdout());
            assertTrue(row.contains("Ongoing") && row.contains("java-txn-0"),
                    "describe shows the state and the partition: " + row);
            // CurrentTransactionStartTimeMs is wall-clock time, so the tool's duration is short.
            String[] fields = described.stdout().get(1).trim().split("\\s+");
            long started = Long.parseLong(fields[6]);
            assertTrue(Math.abs(System.currentTimeMillis() - started) < 60_000, "started at " + started + ": " + row);
            KafkaTool.Result producers = transactionsTool("transactions-describe-producers", "describe-producers",
                    "--topic", "java-txn", "--partition", "0");
            assertEquals(0, producers.exitCode(), producers.describe());
            assertTrue(producers.stdout().size() >= 2, "a header and the producers: " + producers.stdout());
            open.commitTransaction();
        } finally {
            open.close(Duration.ZERO);
        }
        KafkaTool.Result after = transactionsTool("transactions-describe-after", "describe",
                "--transactional-id", "java-txn-tool");
        assertTrue(String.join("\n", after.stdout()).contains("CompleteCommit"), after.describe());
    }

    @Test
    void consumeTransformProduceCommitsTheGroupOffsetsOnlyWithTheTransaction() throws Exception {
        try (KafkaProducer<String, String> plain = Clients.producer(cluster.broker(), Map.of())) {
            for (int i = 0; i < 3; i++) {
                plain.send(new ProducerRecord<>("java-txn-in", 0, null, "in-" + i)).get();
            }
        }
        TopicPartition in = new TopicPartition("java-txn-in", 0);
        try (KafkaConsumer<String, String> consumer = Clients.consumer(cluster.broker(), "java-ctp", "java-ctp");
             KafkaProducer<String, String> producer = transactional("java-txn-ctp")) {
            consumer.subscribe(List.of("java-txn-in"));
            List<ConsumerRecord<String, String>> seen = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (seen.size() < 3 && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200)).forEach(seen::add);
            }
            assertEquals(3, seen.size(), "the input was read");

            producer.beginTransaction();
            producer.send(new ProducerRecord<>("java-txn-out", 0, null, "dropped"));
            producer.sendOffsetsToTransaction(Map.of(in, new OffsetAndMetadata(1)), consumer.groupMetadata());
            producer.flush();
            producer.abortTransaction();
            assertEquals(null, consumer.committed(Set.of(in)).get(in), "an aborted transaction commits no offsets");

            producer.beginTransaction();
            for (ConsumerRecord<String, String> r : seen) {
                producer.send(new ProducerRecord<>("java-txn-out", 0, null, r.value().replace("in", "out")));
            }
            producer.sendOffsetsToTransaction(Map.of(in, new OffsetAndMetadata(3)), consumer.groupMetadata());
            producer.commitTransaction();
            Wait.until("the transaction's offsets reach the group", () -> {
                OffsetAndMetadata committed = consumer.committed(Set.of(in)).get(in);
                return committed != null && committed.offset() == 3;
            });
        }
        assertEquals(List.of("out-0", "out-1", "out-2"), read("java-txn-out", "read_committed", 3));
    }
}
