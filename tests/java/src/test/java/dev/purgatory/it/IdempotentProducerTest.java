package dev.purgatory.it;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/*
 * An idempotent acks=all KafkaProducer (kafka-clients 4.4) with each compression codec:
 * every acknowledged record gets the next offset, in send order, and a consumer reads back
 * exactly the keys, values and headers that were sent. Also that acks=all really waits for
 * the two followers: with both paused the produce is parked in the broker's produce
 * purgatory and is acknowledged only after they resume.
 */
class IdempotentProducerTest {
    private static final int RECORDS = 2000;

    @RegisterExtension
    static final BrokerExtension cluster = new BrokerExtension();

    @ParameterizedTest(name = "compression.type={0}")
    @ValueSource(strings = {"zstd", "lz4", "gzip", "snappy"})
    void acknowledgesEveryRecordInOrderAndReadsItBack(String compression) throws Exception {
        String topic = "idempotent-" + compression;
        // Auto-created by the producer's metadata request: one partition, three replicas.
        TopicPartition tp = new TopicPartition(topic, 0);
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<String, String> producer = Clients.producer(cluster.broker(), Map.of(
                ProducerConfig.COMPRESSION_TYPE_CONFIG, compression,
                ProducerConfig.LINGER_MS_CONFIG, 5,
                ProducerConfig.BATCH_SIZE_CONFIG, 8192,
                ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 5,
                ProducerConfig.CLIENT_ID_CONFIG, "idempotent-" + compression))) {
            for (int i = 0; i < RECORDS; i++) {
                ProducerRecord<String, String> record = new ProducerRecord<>(topic, key(i), value(compression, i));
                record.headers().add("seq", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                acks.add(producer.send(record));
            }
            producer.flush();
        }
        for (int i = 0; i < RECORDS; i++) {
            RecordMetadata metadata = acks.get(i).get();
            assertEquals(0, metadata.partition());
            assertEquals(i, metadata.offset(), "offset of record " + i);
        }

        assertEquals(RECORDS, cluster.latestOffset(tp), "high watermark after " + RECORDS + " acknowledged records");
        JsonNode state = cluster.broker().partition(topic, 0);
        assertEquals(RECORDS, state.path("high_watermark").asLong());
        assertEquals(RECORDS, state.path("log_end_offset").asLong());
        assertTrue(state.path("batch_count").asLong() > 1, "the records went in several batches: " + state);
        // The batches carried the producer id that InitProducerId gave it: one producer's state.
        assertEquals(1, state.path("producer_count").asInt(), "idempotent producers known for " + tp);

        List<ConsumerRecord<String, String>> read = readAll(tp, RECORDS);
        for (int i = 0; i < RECORDS; i++) {
            ConsumerRecord<String, String> record = read.get(i);
            assertEquals(i, record.offset());
            assertEquals(key(i), record.key(), "key at offset " + i);
            assertEquals(value(compression, i), record.value(), "value at offset " + i);
            Header[] headers = record.headers().toArray();
            assertEquals(1, headers.length, "headers at offset " + i);
            assertEquals("seq", headers[0].key());
            assertEquals(Integer.toString(i), new String(headers[0].value(), StandardCharsets.UTF_8));
        }
    }

    @Test
    void acksAllWaitsInThePurgatoryUntilTheFollowersCatchUp() throws Exception {
        String topic = "idempotent-waits";
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> producer = Clients.producer(cluster.broker(), Map.of())) {
            assertEquals(0, producer.send(new ProducerRecord<>(topic, "k0", "before the pause")).get().offset());
            try {
                cluster.broker().follower(2, "pause");
                cluster.broker().follower(3, "pause");
                Future<RecordMetadata> parked = producer.send(new ProducerRecord<>(topic, "k1", "while paused"));
                Wait.until("the produce to be parked in the produce purgatory", () ->
                        pendingProduces(topic + "-0") == 1);
                // Parked: the leader has it (LEO 2) but the followers have not fetched it (HW 1).
                JsonNode partition = cluster.broker().partition(topic, 0);
                assertEquals(2, partition.path("log_end_offset").asLong());
                assertEquals(1, partition.path("high_watermark").asLong());
                assertFalse(parked.isDone(), "acks=all answered before the followers replicated it");
                assertEquals(1, cluster.latestOffset(tp),
                        "a consumer's end offset is the high watermark, not the log end");

                cluster.broker().follower(2, "resume");
                cluster.broker().follower(3, "resume");
                RecordMetadata metadata = parked.get(60, TimeUnit.SECONDS);
                assertEquals(1, metadata.offset());
            } finally {
                cluster.broker().follower(2, "resume");
                cluster.broker().follower(3, "resume");
            }
        }
        assertEquals(2, cluster.latestOffset(tp));
        List<ConsumerRecord<String, String>> read = readAll(tp, 2);
        assertEquals(List.of("before the pause", "while paused"), read.stream().map(ConsumerRecord::value).toList());
    }

    @Test
    void aProduceRetriedAfterItsRequestTimedOutIsWrittenOnce() throws Exception {
        String topic = "idempotent-retried";
        TopicPartition tp = new TopicPartition(topic, 0);
        // A short request timeout: while both followers are paused each attempt waits in the
        // produce purgatory until its timeout expires it (REQUEST_TIMED_OUT), and the client
        // sends the same batch again, with the same producer id and sequence number.
        try (KafkaProducer<String, String> producer = Clients.producer(cluster.broker(), Map.of(
                ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 1500,
                ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120000,
                ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 100,
                ProducerConfig.CLIENT_ID_CONFIG, "idempotent-retried"))) {
            assertEquals(0, producer.send(new ProducerRecord<>(topic, "k0", "first")).get().offset());
            Future<RecordMetadata> retried;
            try {
                cluster.broker().follower(2, "pause");
                cluster.broker().follower(3, "pause");
                retried = producer.send(new ProducerRecord<>(topic, "k1", "sent until acknowledged"));
                Wait.until("the producer to retry the batch twice", () -> retries(producer) >= 2);
                assertFalse(retried.isDone(), "acknowledged while both followers were paused");
            } finally {
                cluster.broker().follower(2, "resume");
                cluster.broker().follower(3, "resume");
            }
            assertEquals(1, retried.get(60, TimeUnit.SECONDS).offset(), "offset of the retried record");
            assertEquals(2, producer.send(new ProducerRecord<>(topic, "k2", "after")).get().offset());
        }
        // The broker appended the first attempt and recognised every retry as a duplicate.
        assertEquals(3, cluster.latestOffset(tp));
        assertEquals(3, cluster.broker().partition(topic, 0).path("log_end_offset").asLong());
        assertEquals(List.of("first", "sent until acknowledged", "after"),
                readAll(tp, 3).stream().map(ConsumerRecord::value).toList());
    }

    private static double retries(KafkaProducer<String, String> producer) {
        return producer.metrics().entrySet().stream()
                .filter(e -> e.getKey().name().equals("record-retry-total")
                        && e.getKey().group().equals("producer-metrics"))
                .mapToDouble(e -> ((Number) e.getValue().metricValue()).doubleValue())
                .sum();
    }

    private static int pendingProduces(String key) throws Exception {
        int count = 0;
        for (JsonNode op : cluster.broker().state().path("purgatories").path("produce").path("pending")) {
            for (JsonNode k : op.path("keys")) {
                if (k.asText().equals(key)) {
                    count++;
                }
            }
        }
        return count;
    }

    /** Reads a partition from offset 0 with assign + seek until {@code count} records came. */
    private static List<ConsumerRecord<String, String>> readAll(TopicPartition tp, int count) throws Exception {
        List<ConsumerRecord<String, String>> read = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = Clients.consumer(cluster.broker(), null, "reader-" + tp)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            Wait.until(count + " records from " + tp + " (have " + read.size() + ")", () -> {
                consumer.poll(Duration.ofMillis(200)).forEach(read::add);
                return read.size() >= count;
            });
        }
        assertEquals(count, read.size(), "records read back from " + tp);
        return read;
    }

    private static String key(int i) {
        return "key-" + i;
    }

    /** Repetitive enough to compress, and different for every record and codec. */
    private static String value(String compression, int i) {
        return compression + " value " + i + " " + "abcdefghij".repeat(1 + i % 7);
    }
}
