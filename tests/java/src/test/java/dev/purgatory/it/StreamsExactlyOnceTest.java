package dev.purgatory.it;

import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Produced;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/*
 * A Kafka Streams word count (kafka-streams 4.4) with processing.guarantee=exactly_once_v2:
 * its repartition and changelog topics, its transactional producer, its offsets committed
 * in its transactions. Run to completion, its read_committed output holds, for every word,
 * counts that only go up and end at the exact count of the input.
 */
class StreamsExactlyOnceTest {
    @RegisterExtension
    static final BrokerExtension cluster = new BrokerExtension(
            new NewTopic("streams-lines", 2, (short) 3),
            new NewTopic("streams-counts", 2, (short) 3));

    @Test
    void wordCountWithExactlyOnceV2CountsEveryWordExactly() throws Exception {
        List<String> lines = new ArrayList<>();
        Map<String, Long> expected = new HashMap<>();
        for (int i = 0; i < 60; i++) {
            String line = "w" + (i % 7) + " w" + (i % 3) + " shared";
            lines.add(line);
            for (String word : line.split(" ")) {
                expected.merge(word, 1L, Long::sum);
            }
        }
        try (KafkaProducer<String, String> producer = Clients.producer(cluster.broker(), Map.of())) {
            for (int i = 0; i < lines.size(); i++) {
                producer.send(new ProducerRecord<>("streams-lines", i % 2, null, lines.get(i))).get();
            }
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("streams-lines")
                .flatMapValues(line -> Arrays.asList(line.split(" ")))
                .groupBy((key, word) -> word)
                .count()
                .toStream()
                .to("streams-counts", Produced.with(Serdes.String(), Serdes.Long()));
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "purgatory-word-count");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("purgatory-streams").toString());
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        Map<String, List<Long>> seen = new HashMap<>();
        try (KafkaStreams streams = new KafkaStreams(builder.build(), props);
             KafkaConsumer<String, Long> reader = new KafkaConsumer<>(Map.of(
                     ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap(),
                     ConsumerConfig.GROUP_ID_CONFIG, "streams-output-reader",
                     ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                     ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest"),
                     new StringDeserializer(), new LongDeserializer())) {
            streams.start();
            reader.subscribe(List.of("streams-counts"));
            long deadline = System.currentTimeMillis() + 90_000;
            while (!finalCounts(seen).equals(expected) && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, Long> r : reader.poll(Duration.ofMillis(200))) {
                    seen.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
                }
            }
            assertEquals(KafkaStreams.State.RUNNING, streams.state(), "the application kept running");
            // The output was written in transactions: besides the counts, its partitions
            // hold the COMMIT markers, which take offsets no consumer reads.
            long records = seen.values().stream().mapToLong(List::size).sum();
            long offsets = reader.endOffsets(reader.assignment()).values().stream().mapToLong(Long::longValue).sum();
            assertTrue(offsets > records, "markers between the counts: " + offsets + " offsets, " + records + " records");
        }
        assertEquals(expected, finalCounts(seen), "every word counted exactly once");
        for (Map.Entry<String, List<Long>> counts : seen.entrySet()) {
            List<Long> values = counts.getValue();
            for (int i = 1; i < values.size(); i++) {
                assertTrue(values.get(i) > values.get(i - 1),
                        "counts of " + counts.getKey() + " only go up, none twice: " + values);
            }
        }
    }

    private static Map<String, Long> finalCounts(Map<String, List<Long>> seen) {
        Map<String, Long> last = new HashMap<>();
        seen.forEach((word, values) -> last.put(word, values.get(values.size() - 1)));
        return last;
    }
}
