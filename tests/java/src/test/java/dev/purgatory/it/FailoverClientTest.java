package dev.purgatory.it;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/*
 * Issue 20, point 5: the Java client (kafka-clients 4.4) keeps producing and consuming
 * across a leader kill, with at most the delay its retries take. The same sequence as
 * tests/python/test_failover_clients.py, on `purgatory serve --brokers 3` of its own:
 *
 * 1. a topic with 1 partition, replication factor 3, min.insync.replicas=2, led by broker 1;
 * 2. an idempotent acks=all KafkaProducer writes a first batch, every record acknowledged;
 * 3. it keeps writing a second batch (at most 5 records unanswered), and once some of it is
 *    acknowledged broker 1 is killed over the admin API: the answer must show a clean
 *    election to broker 2 or 3, leader epoch 1; the producer writes 20 more records after
 *    the kill was answered;
 * 4. a KafkaConsumer bootstrapped on the new leader alone reads the partition to its high
 *    watermark: every record acknowledged is there once, at the offset it was told, in the
 *    order sent;
 * 5. broker 1 restarts as a follower and rejoins the ISR.
 *
 * What the Java producer does on the kill: the connection to broker 1 closes under the
 * requests in flight, which fail with NETWORK_EXCEPTION ("Disconnected from node 1",
 * retriable; logged as a "Got error produce response" warning); that marks the metadata
 * stale, the refresh (from broker 2 or 3) names the new leader, and the batches are sent
 * there again after retry.backoff.ms with the same producer id and sequence numbers. A
 * produce that reached a broker no longer leader would get NOT_LEADER_OR_FOLLOWER, with the
 * new leader in the response (KIP-951), and be retried the same way.
 *
 * There is no bound on how long the client takes: each wait is on an observable condition
 * with a generous deadline naming what it waited for.
 */
class FailoverClientTest {
    private static final int FIRST = 20;
    private static final int BEFORE_KILL = 5;
    private static final int AFTER_KILL = 20;
    private static final int WINDOW = 5;

    @Test
    void producesAndConsumesAcrossALeaderKill() throws Exception {
        String topic = "failover-java";
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Cluster cluster = Cluster.start()) {
            try (Admin admin = cluster.admin()) {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 3)
                        .configs(Map.of("min.insync.replicas", "2")))).all().get(30, TimeUnit.SECONDS);
            }
            Wait.until(topic + " led by broker 1 with a full ISR", Duration.ofSeconds(30), () -> {
                JsonNode p = cluster.partition(topic);
                return p != null && p.path("leader").asInt() == 1 && isr(p).equals(List.of(1, 2, 3));
            });

            List<String> sent = Collections.synchronizedList(new ArrayList<>());
            Map<String, Long> acked = Collections.synchronizedMap(new LinkedHashMap<>());
            Map<String, String> failed = Collections.synchronizedMap(new LinkedHashMap<>());
            AtomicBoolean killAnswered = new AtomicBoolean();
            AtomicReference<Throwable> producerThreadError = new AtomicReference<>();
            int newLeader;
            int unansweredAtKill;
            double retries;
            try (KafkaProducer<String, String> producer = producer(cluster)) {
                for (int i = 0; i < FIRST; i++) {
                    send(producer, topic, "first-" + i, sent, acked, failed);
                }
                producer.flush();
                assertEquals(FIRST, acked.size(), "first batch acknowledged: failed " + failed);

                // The second batch, sent while broker 1 is killed.
                Thread producing = new Thread(() -> {
                    try {
                        List<Future<RecordMetadata>> futures = new ArrayList<>();
                        int after = 0;
                        while (after < AFTER_KILL && futures.size() < 100000) {
                            if (futures.size() >= WINDOW) {
                                // Wait until the record WINDOW back is answered (either way:
                                // the callback keeps which); a deadline, not a time bound.
                                try {
                                    futures.get(futures.size() - WINDOW).get(90, TimeUnit.SECONDS);
                                } catch (ExecutionException answeredWithAnError) {
                                    // counted in `failed` by the callback
                                }
                            }
                            if (killAnswered.get()) {
                                after++;
                            }
                            futures.add(send(producer, topic, "second-" + futures.size(), sent, acked, failed));
                        }
                    } catch (Throwable t) {
                        producerThreadError.set(t);
                    }
                }, "second-batch");
                producing.start();
                Wait.until(BEFORE_KILL + " records of the second batch acknowledged", Duration.ofSeconds(30),
                        () -> acked.size() >= FIRST + BEFORE_KILL);
                JsonNode killed = cluster.post("/api/brokers/1/kill");
                unansweredAtKill = sent.size() - acked.size() - failed.size();
                killAnswered.set(true);
                newLeader = checkElection(killed, topic);
                producing.join(TimeUnit.SECONDS.toMillis(120));
                assertFalse(producing.isAlive(), "the second batch's producer thread did not finish");
                assertNull(producerThreadError.get(), "the second batch's producer thread failed");
                producer.flush();
                Wait.until("every record sent answered", Duration.ofSeconds(90),
                        () -> acked.size() + failed.size() == sent.size());
                retries = metric(producer, "record-retry-total");
            }
            System.out.printf("%nJava: killed broker 1 with %d records unanswered; new leader %d; "
                    + "the producer retried %.0f records%n", unansweredAtKill, newLeader, retries);

            JsonNode p = cluster.partition(topic);
            assertEquals(newLeader, p.path("leader").asInt(), "leader: " + p);
            assertEquals(1, p.path("leader_epoch").asInt(), "leader epoch: " + p);
            assertFalse(isr(p).contains(1), "broker 1 is out of the ISR: " + p);
            long end = p.path("high_watermark").asLong();
            List<ConsumerRecord<String, String>> stored = new ArrayList<>();
            try (KafkaConsumer<String, String> consumer = consumer(cluster.listener(newLeader))) {
                consumer.assign(List.of(tp));
                consumer.seekToBeginning(List.of(tp));
                Wait.until(end + " records read back from broker " + newLeader, Duration.ofSeconds(60), () -> {
                    consumer.poll(Duration.ofMillis(200)).forEach(stored::add);
                    return stored.size() >= end;
                });
            }
            checkReadBack(new ArrayList<>(sent), new LinkedHashMap<>(acked), new LinkedHashMap<>(failed), stored);

            cluster.post("/api/brokers/1/restart");
            Wait.until("broker 1 to catch up and rejoin the ISR of " + topic, Duration.ofSeconds(60),
                    () -> isr(cluster.partition(topic)).stream().sorted().toList().equals(List.of(1, 2, 3)));
            JsonNode after = cluster.partition(topic);
            assertEquals(newLeader, after.path("leader").asInt(), "leader after the restart: " + after);
        }
    }

    /** The kill's answer: one clean election of the partition, leader epoch 0 -> 1. */
    private static int checkElection(JsonNode killed, String topic) {
        List<JsonNode> elected = new ArrayList<>();
        for (JsonNode c : killed.path("changes")) {
            if (c.path("type").asText().equals("leader_elected") && c.path("tp").path("topic").asText().equals(topic)
                    && c.path("tp").path("partition").asInt() == 0) {
                elected.add(c);
            }
        }
        assertEquals(1, elected.size(), "one election of " + topic + "-0 in the kill's answer: " + killed);
        JsonNode e = elected.get(0);
        assertTrue(e.path("clean").asBoolean(), "a clean election from the ISR: " + e);
        assertEquals(1, e.path("leader_epoch").asInt(), "leader epoch 0 -> 1: " + e);
        int newLeader = e.path("new_leader").asInt();
        assertTrue(newLeader == 2 || newLeader == 3, "the new leader is broker 2 or 3: " + e);
        return newLeader;
    }

    private static void checkReadBack(List<String> sent, Map<String, Long> acked, Map<String, String> failed,
                                      List<ConsumerRecord<String, String>> stored) {
        Map<Long, String> at = new HashMap<>();
        List<String> values = new ArrayList<>();
        for (ConsumerRecord<String, String> r : stored) {
            at.put(r.offset(), r.value());
            values.add(r.value());
        }
        Set<String> storedValues = new HashSet<>(values);
        List<String> lost = acked.keySet().stream().filter(v -> !storedValues.contains(v)).toList();
        int duplicates = values.size() - storedValues.size();
        System.out.printf("Java: %d sent, %d acknowledged, %d failed, %d read back, %d lost, %d duplicates%n",
                sent.size(), acked.size(), failed.size(), stored.size(), lost.size(), duplicates);
        assertEquals(Map.of(), failed, "records the producer gave up on");
        assertEquals(new HashSet<>(sent), acked.keySet(), "every record sent was acknowledged");
        assertEquals(List.of(), lost, "acknowledged and not read back");
        assertEquals(0, duplicates, "records read back twice");
        for (int i = 0; i < stored.size(); i++) {
            assertEquals(i, stored.get(i).offset(), "offsets read back are 0..N-1");
        }
        Map<String, String> misplaced = acked.entrySet().stream()
                .filter(e -> !e.getKey().equals(at.get(e.getValue())))
                .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue() + " holds " + at.get(e.getValue())));
        assertEquals(Map.of(), misplaced, "records not at the offset they were acknowledged at");
        Lists.assertSameList(sent, values.stream().filter(acked::containsKey).toList(),
                "records read back in the order sent");
    }

    private static Future<RecordMetadata> send(KafkaProducer<String, String> producer, String topic, String value,
                                               List<String> sent, Map<String, Long> acked, Map<String, String> failed) {
        sent.add(value);
        return producer.send(new ProducerRecord<>(topic, 0, null, value), (metadata, error) -> {
            if (error == null) {
                acked.put(value, metadata.offset());
            } else {
                failed.put(value, error.toString());
            }
        });
    }

    /** The retry settings a user would give, explicitly. */
    private static KafkaProducer<String, String> producer(Cluster cluster) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "failover-java");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        props.put(ProducerConfig.RETRIES_CONFIG, 20);
        props.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 100);
        props.put(ProducerConfig.RETRY_BACKOFF_MAX_MS_CONFIG, 1000);
        props.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, 50);
        props.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 1000);
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10000);
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60000);
        props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, WINDOW);
        props.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    private static KafkaConsumer<String, String> consumer(String bootstrap) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "failover-java-reader");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, 100);
        return new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    }

    private static double metric(KafkaProducer<String, String> producer, String name) {
        return producer.metrics().entrySet().stream()
                .filter(e -> e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics"))
                .mapToDouble(e -> ((Number) e.getValue().metricValue()).doubleValue())
                .sum();
    }

    private static List<Integer> isr(JsonNode partition) {
        List<Integer> isr = new ArrayList<>();
        if (partition != null) {
            partition.path("isr").forEach(b -> isr.add(b.asInt()));
        }
        return isr;
    }

    /**
     * {@code purgatory serve --brokers 3}: three brokers in one process, every listener on a
     * port the kernel picks, named by its ready file ({@link Launch}), as
     * tests/python/conftest.py's Cluster. Its output goes to
     * {@code <repo>/target/java-cluster-PID-N.log}.
     */
    static final class Cluster implements AutoCloseable {
        private static final ObjectMapper JSON = new ObjectMapper();
        private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

        private final Process process;
        private final String admin;
        /** Broker id to the host:port its listener is bound to. */
        private final Map<Integer, String> listeners;

        private Cluster(Launch.Server server) {
            this.process = server.process();
            this.admin = server.admin();
            this.listeners = server.listeners();
        }

        static Cluster start() throws Exception {
            Cluster cluster = new Cluster(Launch.start("cluster", List.of(
                    "--config", PurgatoryBroker.repoRoot().resolve("config/broker.toml").toString(),
                    "--brokers", "3",
                    "--listen", "127.0.0.1:0")));
            if (!cluster.listeners.keySet().equals(Set.of(1, 2, 3))) {
                cluster.close();
                throw new IllegalStateException("the cluster's ready file names brokers " + cluster.listeners);
            }
            return cluster;
        }

        String bootstrap() {
            return String.join(",", listeners.values());
        }

        String listener(int brokerId) {
            String listener = listeners.get(brokerId);
            assertNotNull(listener, "broker " + brokerId + " in " + listeners);
            return listener;
        }

        Admin admin() {
            Properties props = new Properties();
            props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
            props.put(AdminClientConfig.CLIENT_ID_CONFIG, "failover-java-admin");
            return Admin.create(props);
        }

        JsonNode partition(String topic) throws IOException, InterruptedException {
            for (JsonNode p : get("/api/state").path("partitions")) {
                if (p.path("topic").asText().equals(topic) && p.path("partition").asInt() == 0) {
                    return p;
                }
            }
            return null;
        }

        JsonNode get(String path) throws IOException, InterruptedException {
            return call(HttpRequest.newBuilder(uri(path)).GET(), 5);
        }

        JsonNode post(String path) throws IOException, InterruptedException {
            return call(HttpRequest.newBuilder(uri(path)).POST(HttpRequest.BodyPublishers.noBody()), 30);
        }

        private URI uri(String path) {
            return URI.create(admin + path);
        }

        private static JsonNode call(HttpRequest.Builder request, int timeoutSeconds)
                throws IOException, InterruptedException {
            HttpResponse<String> response = HTTP.send(request.timeout(Duration.ofSeconds(timeoutSeconds)).build(),
                    HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 200) {
                throw new IOException(request.build().uri() + " answered " + response.statusCode() + ": "
                        + response.body());
            }
            return JSON.readTree(response.body());
        }

        /** SIGTERM, then SIGKILL if it has not stopped within 10 s. */
        @Override
        public void close() throws InterruptedException {
            Launch.stop(process);
        }
    }
}
