package dev.purgatory.it;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/*
 * A smoke test with Kafka's load generator, ProducerPerformance (kafka-tools 4.4), as its own
 * JVM: 20000 records of 100 bytes with acks=-1 at full speed. Its summary must count every
 * record sent, the topic's high watermark must be exactly that count, and the records read
 * back must be the size it sent.
 */
class ProducerPerformanceTest {
    private static final int RECORDS = 20000;
    private static final int RECORD_SIZE = 100;
    /** The final summary: "20000 records sent, 12345.6 records/sec (1.18 MB/sec), ... 99.9th." */
    private static final Pattern SUMMARY = Pattern.compile(
            "^(\\d+) records sent, [\\d.]+ records/sec \\([\\d.]+ MB/sec\\), [\\d.]+ ms avg latency, "
                    + "[\\d.]+ ms max latency, \\d+ ms 50th, \\d+ ms 95th, \\d+ ms 99th, \\d+ ms 99.9th\\.$");

    @RegisterExtension
    static final BrokerExtension cluster = new BrokerExtension();

    @Test
    void producerPerformanceSendsEveryRecordWithAcksAll() throws Exception {
        String topic = "perf";
        KafkaTool.Result result = KafkaTool.run("producer-performance", "org.apache.kafka.tools.ProducerPerformance",
                List.of("--topic", topic, "--num-records", Integer.toString(RECORDS),
                        "--record-size", Integer.toString(RECORD_SIZE), "--throughput", "-1",
                        "--bootstrap-server", cluster.broker().bootstrap(), "--command-property", "acks=-1"),
                300);
        assertEquals(0, result.exitCode(), result.describe());

        Matcher summary = null;
        for (String line : result.stdout()) {
            Matcher m = SUMMARY.matcher(line.trim());
            if (m.matches()) {
                summary = m;
            }
        }
        assertNotNull(summary, "no final summary line in:\n" + String.join("\n", result.stdout()));
        assertEquals(RECORDS, Integer.parseInt(summary.group(1)), "records sent, per the summary");

        // The topic was auto-created with one partition: every record is below the HW.
        TopicPartition tp = new TopicPartition(topic, 0);
        assertEquals(RECORDS, cluster.latestOffset(tp));
        JsonNode partition = cluster.broker().partition(topic, 0);
        assertEquals(RECORDS, partition.path("high_watermark").asLong(), "HW in /api/state: " + partition);
        assertEquals(RECORDS, partition.path("log_end_offset").asLong(), "LEO in /api/state: " + partition);
        assertEquals(List.of(1, 2, 3), ids(partition.path("isr")), "ISR in /api/state");

        // The first and the last record are there, each of the size sent.
        try (KafkaConsumer<String, String> consumer = Clients.consumer(cluster.broker(), null, "perf-reader")) {
            consumer.assign(List.of(tp));
            for (long offset : new long[] {0, RECORDS - 1}) {
                consumer.seek(tp, offset);
                List<ConsumerRecord<String, String>> got = new ArrayList<>();
                Wait.until("the record at offset " + offset, () -> {
                    consumer.poll(Duration.ofMillis(200)).forEach(got::add);
                    return !got.isEmpty();
                });
                ConsumerRecord<String, String> record = got.get(0);
                assertEquals(offset, record.offset());
                assertEquals(RECORD_SIZE, record.serializedValueSize(), "value size at offset " + offset);
                assertTrue(record.key() == null, "ProducerPerformance sends no key by default");
            }
        }
    }

    private static List<Integer> ids(JsonNode array) {
        List<Integer> ids = new ArrayList<>();
        array.forEach(n -> ids.add(n.asInt()));
        return ids;
    }
}
