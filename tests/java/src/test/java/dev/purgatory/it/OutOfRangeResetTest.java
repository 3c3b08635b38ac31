package dev.purgatory.it;

import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/*
 * A KafkaConsumer (kafka-clients 4.4) positioned outside the log. The broker answers its
 * fetch OFFSET_OUT_OF_RANGE, and the consumer acts on its auto.offset.reset: "earliest"
 * reads from the log start, "latest" from the log end, and "none" throws to the
 * application, as it would against Kafka.
 */
class OutOfRangeResetTest {
    @RegisterExtension
    static final BrokerExtension cluster = new BrokerExtension(
            new NewTopic("reset-earliest", 1, (short) 1),
            new NewTopic("reset-latest", 1, (short) 1),
            new NewTopic("reset-none", 1, (short) 1));

    @Test
    void earliestReadsFromTheLogStart() throws Exception {
        TopicPartition tp = new TopicPartition("reset-earliest", 0);
        produce(tp, "a", "b", "c");
        try (KafkaConsumer<String, String> consumer = consumer("earliest")) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 999);
            assertEquals(List.of("a", "b", "c"), read(consumer, 3));
        }
    }

    @Test
    void latestMovesToTheLogEnd() throws Exception {
        TopicPartition tp = new TopicPartition("reset-latest", 0);
        produce(tp, "before");
        try (KafkaConsumer<String, String> consumer = consumer("latest")) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 1000);
            // Once the fetch from 1000 is refused, the consumer asks for the log end: 1.
            long position = 1000;
            long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
            while (position == 1000 && System.nanoTime() < deadline) {
                consumer.poll(Duration.ofMillis(100));
                position = consumer.position(tp, Duration.ofSeconds(20));
            }
            assertEquals(1, position);
            produce(tp, "after");
            assertEquals(List.of("after"), read(consumer, 1));
        }
    }

    @Test
    void noneTellsTheApplication() throws Exception {
        TopicPartition tp = new TopicPartition("reset-none", 0);
        produce(tp, "x");
        try (KafkaConsumer<String, String> consumer = consumer("none")) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 999);
            OffsetOutOfRangeException e = assertThrows(OffsetOutOfRangeException.class, () -> {
                long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
                while (System.nanoTime() < deadline) {
                    consumer.poll(Duration.ofMillis(200));
                }
            });
            assertEquals(Map.of(tp, 999L), e.offsetOutOfRangePartitions());
        }
    }

    private static void produce(TopicPartition tp, String... values) throws Exception {
        try (KafkaProducer<String, String> producer = Clients.producer(cluster.broker(), Map.of())) {
            for (String value : values) {
                producer.send(new ProducerRecord<>(tp.topic(), tp.partition(), null, value)).get();
            }
        }
    }

    private static KafkaConsumer<String, String> consumer(String reset) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.broker().bootstrap());
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "reset-" + reset);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 200);
        return new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    }

    private static List<String> read(KafkaConsumer<String, String> consumer, int want) {
        List<String> got = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (got.size() < want && System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                got.add(record.value());
            }
        }
        return got;
    }
}
