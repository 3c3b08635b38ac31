package dev.purgatory.it;

import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What the admin tests (the CLI tools' and the Java Admin client's) do around the operation
 * they check: create a topic and wait for its leaders, write records, read offsets back,
 * look at a group. Against our broker or, with PURGATORY_EXTERNAL_BOOTSTRAP, Kafka.
 */
final class AdminFixtures {
    private final BrokerExtension cluster;
    private final String clientPrefix;

    AdminFixtures(BrokerExtension cluster, String clientPrefix) {
        this.cluster = cluster;
        this.clientPrefix = clientPrefix;
    }

    /** Creates the topic (replication factor 3) and waits until every partition has a leader. */
    void createTopic(String topic, int partitions) throws Exception {
        cluster.admin().createTopics(List.of(new NewTopic(topic, partitions, (short) 3))).all().get();
        Wait.until("every partition of " + topic + " to have a leader", () -> {
            TopicDescription d = describeTopicOrNull(topic);
            return d != null && d.partitions().size() == partitions
                    && d.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty());
        });
    }

    TopicDescription describeTopicOrNull(String topic) throws Exception {
        try {
            return describeTopic(topic);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                return null;
            }
            throw e;
        }
    }

    TopicDescription describeTopic(String topic) throws Exception {
        return cluster.admin().describeTopics(List.of(topic)).allTopicNames().get().get(topic);
    }

    long earliestOffset(TopicPartition tp) throws Exception {
        return cluster.admin().listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset();
    }

    /** Writes {@code count} records to one partition with acks=all, checking each was written. */
    void produce(String topic, int partition, int count) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props, new StringSerializer(),
                new StringSerializer())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, partition, "key-" + i, "value-" + i)));
            }
            for (Future<RecordMetadata> f : sent) {
                assertEquals(partition, f.get().partition());
            }
        }
    }

    /** A consumer of {@code group} (null: none, for assign) that commits only when told. */
    KafkaConsumer<String, String> consumer(String group) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, clientPrefix + (group == null ? "reader" : group));
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10000);
        props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
        return new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    }

    /** The offsets of the records a group-less consumer reads from the partition's beginning up to {@code end}. */
    List<Long> readOffsets(TopicPartition tp, long end) throws Exception {
        List<Long> offsets = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = consumer(null)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.nanoTime() + Wait.DEFAULT.toNanos();
            while (consumer.position(tp) < end) {
                assertTrue(System.nanoTime() < deadline, "timed out reading " + tp + "; read " + offsets);
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    offsets.add(r.offset());
                }
            }
        }
        return offsets;
    }

    Map<TopicPartition, Long> committed(String group) throws Exception {
        Map<TopicPartition, Long> offsets = new HashMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : cluster.admin().listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get().entrySet()) {
            if (e.getValue() != null) {
                offsets.put(e.getKey(), e.getValue().offset());
            }
        }
        return offsets;
    }

    void awaitGroupState(String group, GroupState state) throws Exception {
        Wait.until("group " + group + " to be " + state, () -> {
            ConsumerGroupDescription d = cluster.admin().describeConsumerGroups(List.of(group))
                    .describedGroups().get(group).get();
            return d.groupState() == state;
        });
    }
}
