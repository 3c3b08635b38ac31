package dev.purgatory.it;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Java client's transactions on three brokers ({@code purgatory serve --brokers 3}), as
 * tests/python/test_transactions_cluster.py runs them with confluent-kafka: a transaction
 * whose partitions are led by brokers 1, 2 and 3, and an open transaction committed after
 * its coordinator is killed. The Admin client's describeTransactions names the coordinator
 * (FindCoordinator, then DescribeTransactions on that broker).
 */
class ClusterTransactionsTest {
    private static final int PARTITIONS = 3;

    private static String spreadTopic(FailoverClientTest.Cluster cluster, Admin admin, String name) throws Exception {
        admin.createTopics(List.of(new NewTopic(name, PARTITIONS, (short) 3))).all().get();
        Wait.until("a full ISR on every partition of " + name, Duration.ofSeconds(30), () -> {
            for (int i = 0; i < PARTITIONS; i++) {
                JsonNode p = partition(cluster, name, i);
                if (p == null || p.path("isr").size() != 3) {
                    return false;
                }
            }
            return true;
        });
        Set<Integer> leaders = new TreeSet<>();
        for (int i = 0; i < PARTITIONS; i++) {
            leaders.add(partition(cluster, name, i).path("leader").asInt());
        }
        assertEquals(Set.of(1, 2, 3), leaders, "one partition led by each broker");
        return name;
    }

    private static JsonNode partition(FailoverClientTest.Cluster cluster, String topic, int index) throws Exception {
        for (JsonNode p : cluster.get("/api/state").path("partitions")) {
            if (p.path("topic").asText().equals(topic) && p.path("partition").asInt() == index) {
                return p;
            }
        }
        return null;
    }

    private static KafkaProducer<String, String> transactional(FailoverClientTest.Cluster cluster, String id) {
        KafkaProducer<String, String> producer = new KafkaProducer<>(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap(),
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, id,
                ProducerConfig.CLIENT_ID_CONFIG, id,
                ProducerConfig.LINGER_MS_CONFIG, 0),
                new StringSerializer(), new StringSerializer());
        producer.initTransactions();
        return producer;
    }

    /** Every value of one partition at {@code isolation}, read up to its end (the LSO for read_committed). */
    private static List<String> read(FailoverClientTest.Cluster cluster, String topic, int partition, String isolation) {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap(),
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation,
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false),
                new StringDeserializer(), new StringDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, partition);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            while (consumer.position(tp) < end) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
            }
        }
        return values;
    }

    @Test
    void aTransactionOverThreeLeadersCommitsAndAbortsOnEach() throws Exception {
        try (FailoverClientTest.Cluster cluster = FailoverClientTest.Cluster.start();
             Admin admin = cluster.admin()) {
            String topic = spreadTopic(cluster, admin, "java-spread");
            try (KafkaProducer<String, String> producer = transactional(cluster, "java-spread-1")) {
                producer.beginTransaction();
                for (int p = 0; p < PARTITIONS; p++) {
                    producer.send(new ProducerRecord<>(topic, p, null, "committed-" + p));
                }
                producer.commitTransaction();
                producer.beginTransaction();
                for (int p = 0; p < PARTITIONS; p++) {
                    producer.send(new ProducerRecord<>(topic, p, null, "aborted-" + p)).get();
                }
                producer.abortTransaction();
            }
            for (int p = 0; p < PARTITIONS; p++) {
                assertEquals(List.of("committed-" + p), read(cluster, topic, p, "read_committed"));
                assertEquals(List.of("committed-" + p, "aborted-" + p), read(cluster, topic, p, "read_uncommitted"));
            }
        }
    }

    @Test
    void anOpenTransactionIsCommittedThroughTheNewCoordinatorAfterItsCoordinatorIsKilled() throws Exception {
        try (FailoverClientTest.Cluster cluster = FailoverClientTest.Cluster.start();
             Admin admin = cluster.admin()) {
            String topic = spreadTopic(cluster, admin, "java-moving");
            String id = "java-moving-1";
            try (KafkaProducer<String, String> producer = transactional(cluster, id)) {
                producer.beginTransaction();
                for (int p = 0; p < PARTITIONS; p++) {
                    producer.send(new ProducerRecord<>(topic, p, null, "kept-" + p)).get();
                }
                TransactionDescription before = admin.describeTransactions(List.of(id)).description(id).get();
                assertEquals(TransactionState.ONGOING, before.state());
                assertEquals(PARTITIONS, before.topicPartitions().size());
                int coordinator = before.coordinatorId();
                JsonNode killed = cluster.post("/api/brokers/" + coordinator + "/kill");
                boolean moved = false;
                for (JsonNode change : killed.path("changes")) {
                    moved |= change.path("type").asText().equals("leader_elected")
                            && change.path("tp").path("topic").asText().equals("__transaction_state");
                }
                assertTrue(moved, "the coordinator led __transaction_state partitions: " + killed);
                // The client is told NOT_COORDINATOR (or loses its connection), finds the new
                // coordinator, which loaded the open transaction from its copy of the log.
                producer.commitTransaction();
                TransactionDescription after = admin.describeTransactions(List.of(id)).description(id).get();
                assertNotEquals(coordinator, after.coordinatorId());
                assertEquals(TransactionState.COMPLETE_COMMIT, after.state());
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, 0, null, "after"));
                producer.commitTransaction();
            }
            assertEquals(List.of("kept-0", "after"), read(cluster, topic, 0, "read_committed"));
            for (int p = 1; p < PARTITIONS; p++) {
                assertEquals(List.of("kept-" + p), read(cluster, topic, p, "read_committed"));
            }
        }
    }
}
