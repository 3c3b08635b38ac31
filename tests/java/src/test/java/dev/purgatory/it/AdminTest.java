package dev.purgatory.it;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/*
 * The Java Admin client (kafka-clients 4.4) against the broker: what an operator sees of
 * topics (create, describe, delete), their configs and where each value comes from,
 * consumer groups (list, describe, committed offsets, delete) and offsets looked up by
 * position and by timestamp. Every answer is checked against what the test created,
 * produced or committed.
 */
class AdminTest {
    @RegisterExtension
    static final BrokerExtension cluster = new BrokerExtension();

    @Test
    void createsAndDescribesATopicWithItsPartitionsAndReplicas() throws Exception {
        String topic = "admin-created";
        CreateTopicsResult created = cluster.admin().createTopics(List.of(new NewTopic(topic, 3, (short) 3)
                .configs(Map.of("retention.bytes", "10485760"))));
        created.all().get();
        assertEquals(3, created.numPartitions(topic).get());
        assertEquals(3, created.replicationFactor(topic).get());
        assertEquals("10485760", created.config(topic).get().get("retention.bytes").value());

        assertTrue(cluster.admin().listTopics().names().get().contains(topic), "listTopics shows the new topic");

        TopicDescription description = cluster.admin().describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        assertFalse(description.isInternal());
        assertFalse(Uuid.ZERO_UUID.equals(description.topicId()), "a topic id is assigned");
        assertEquals(List.of(0, 1, 2), description.partitions().stream().map(TopicPartitionInfo::partition).toList());
        for (TopicPartitionInfo p : description.partitions()) {
            assertEquals(1, p.leader().id(), "leader of partition " + p.partition());
            assertEquals(List.of(1, 2, 3), ids(p.replicas()), "replicas of partition " + p.partition());
            assertEquals(List.of(1, 2, 3), ids(p.isr()), "ISR of partition " + p.partition());
        }

        ExecutionException again = assertThrows(ExecutionException.class,
                () -> cluster.admin().createTopics(List.of(new NewTopic(topic, 1, (short) 3))).all().get());
        assertInstanceOf(TopicExistsException.class, again.getCause());

        // One leader and two followers: a fourth replica cannot be placed.
        ExecutionException tooMany = assertThrows(ExecutionException.class,
                () -> cluster.admin().createTopics(List.of(new NewTopic("admin-four-replicas", 1, (short) 4)))
                        .all().get());
        assertInstanceOf(InvalidReplicationFactorException.class, tooMany.getCause());
        assertFalse(cluster.admin().listTopics().names().get().contains("admin-four-replicas"));
    }

    @Test
    void describesTopicConfigsWithTheirSources() throws Exception {
        String topic = "admin-configs";
        cluster.admin().createTopics(List.of(new NewTopic(topic, 1, (short) 3)
                .configs(Map.of("min.insync.replicas", "1", "retention.bytes", "5242880")))).all().get();
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config config = cluster.admin().describeConfigs(List.of(resource)).all().get().get(resource);

        ConfigEntry minIsr = config.get("min.insync.replicas");
        assertEquals("1", minIsr.value());
        assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, minIsr.source());
        assertFalse(minIsr.isDefault());

        ConfigEntry retention = config.get("retention.bytes");
        assertEquals("5242880", retention.value());
        assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source());
        assertEquals(ConfigEntry.ConfigType.LONG, retention.type());

        // Not set on the topic, so the topic inherits the broker's setting. As on Kafka, a broker
        // setting whose value is the built-in default is described as DEFAULT_CONFIG, and only one
        // that differs from it as STATIC_BROKER_CONFIG. This broker runs with its defaults here.
        ConfigEntry maxMessage = config.get("max.message.bytes");
        assertNotNull(maxMessage, "max.message.bytes is described");
        assertEquals("1048588", maxMessage.value());
        assertEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, maxMessage.source());
        ConfigEntry cleanup = config.get("cleanup.policy");
        assertNotNull(cleanup, "cleanup.policy is described");
        assertEquals("delete", cleanup.value());
        assertEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, cleanup.source());
        assertEquals("CreateTime", config.get("message.timestamp.type").value());

        // A topic without overrides inherits the broker's min.insync.replicas: 2 is this broker's
        // built-in default (Kafka's is 1), so the source is DEFAULT_CONFIG.
        String plain = "admin-configs-plain";
        cluster.admin().createTopics(List.of(new NewTopic(plain, 1, (short) 3))).all().get();
        ConfigResource plainResource = new ConfigResource(ConfigResource.Type.TOPIC, plain);
        ConfigEntry inherited = cluster.admin().describeConfigs(List.of(plainResource)).all().get().get(plainResource)
                .get("min.insync.replicas");
        assertEquals("2", inherited.value());
        assertEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, inherited.source());

        // The broker's own settings, as broker 1 describes them.
        ConfigResource brokerResource = new ConfigResource(ConfigResource.Type.BROKER, "1");
        Config brokerConfig = cluster.admin().describeConfigs(List.of(brokerResource)).all().get().get(brokerResource);
        ConfigEntry brokerMinIsr = brokerConfig.get("min.insync.replicas");
        assertNotNull(brokerMinIsr, "broker 1 describes min.insync.replicas");
        assertEquals("2", brokerMinIsr.value());
        assertEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, brokerMinIsr.source());
        assertEquals("0", brokerConfig.get("group.initial.rebalance.delay.ms").value());
    }

    @Test
    void listsOffsetsByPositionAndByTimestamp() throws Exception {
        String topic = "admin-offsets";
        cluster.admin().createTopics(List.of(new NewTopic(topic, 2, (short) 3))).all().get();
        TopicPartition empty = new TopicPartition(topic, 0);
        TopicPartition written = new TopicPartition(topic, 1);

        // Ten records one second apart in create time, in two batches, all to partition 1.
        long base = (System.currentTimeMillis() / 1000 - 3600) * 1000;
        try (KafkaProducer<String, String> producer = Clients.producer(cluster.broker(), Map.of("linger.ms", 50))) {
            for (int batch = 0; batch < 2; batch++) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = batch * 5; i < batch * 5 + 5; i++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, 1, base + i * 1000L, "k" + i, "v" + i)));
                }
                producer.flush();
                for (int i = 0; i < sent.size(); i++) {
                    assertEquals(batch * 5 + i, sent.get(i).get().offset());
                }
            }
        }

        assertOffset(written, "earliest()", OffsetSpec.earliest(), 0, -1);
        assertOffset(written, "latest()", OffsetSpec.latest(), 10, -1);
        assertOffset(written, "forTimestamp(base)", OffsetSpec.forTimestamp(base), 0, base);
        assertOffset(written, "forTimestamp(base+2500)", OffsetSpec.forTimestamp(base + 2500), 3, base + 3000);
        assertOffset(written, "forTimestamp(base+5000)", OffsetSpec.forTimestamp(base + 5000), 5, base + 5000);
        assertOffset(written, "forTimestamp(base+9000)", OffsetSpec.forTimestamp(base + 9000), 9, base + 9000);
        assertOffset(written, "forTimestamp(base-60_000)", OffsetSpec.forTimestamp(base - 60_000), 0, base);
        // Later than every record: no offset.
        assertOffset(written, "forTimestamp(base+9001)", OffsetSpec.forTimestamp(base + 9001), -1, -1);
        assertOffset(written, "maxTimestamp()", OffsetSpec.maxTimestamp(), 9, base + 9000);

        assertOffset(empty, "earliest()", OffsetSpec.earliest(), 0, -1);
        assertOffset(empty, "latest()", OffsetSpec.latest(), 0, -1);
        assertOffset(empty, "forTimestamp(base)", OffsetSpec.forTimestamp(base), -1, -1);

        // A record found by timestamp comes with the leader epoch it was written in: the
        // topic's first leader, epoch 0.
        assertEquals(Optional.of(0), cluster.admin().listOffsets(Map.of(written, OffsetSpec.forTimestamp(base + 2500)))
                .partitionResult(written).get().leaderEpoch());
    }

    @Test
    void listOffsetsFindingNoRecordForATimestampHasNoLeaderEpoch() throws Exception {
        String topic = "admin-offsets-none";
        cluster.admin().createTopics(List.of(new NewTopic(topic, 1, (short) 3))).all().get();
        TopicPartition tp = new TopicPartition(topic, 0);
        long now = System.currentTimeMillis();
        try (KafkaProducer<String, String> producer = Clients.producer(cluster.broker(), Map.of())) {
            assertEquals(0, producer.send(new ProducerRecord<>(topic, 0, now, "k", "v")).get().offset());
        }
        ListOffsetsResultInfo later = cluster.admin().listOffsets(Map.of(tp, OffsetSpec.forTimestamp(now + 1000)))
                .partitionResult(tp).get();
        assertEquals(-1, later.offset());
        assertEquals(-1, later.timestamp());
        assertEquals(Optional.empty(), later.leaderEpoch(), "leader epoch of a ListOffsets that found nothing");
        // Likewise the largest timestamp of an empty partition.
        String empty = "admin-offsets-empty";
        cluster.admin().createTopics(List.of(new NewTopic(empty, 1, (short) 3))).all().get();
        TopicPartition emptyTp = new TopicPartition(empty, 0);
        ListOffsetsResultInfo max = cluster.admin().listOffsets(Map.of(emptyTp, OffsetSpec.maxTimestamp()))
                .partitionResult(emptyTp).get();
        assertEquals(-1, max.offset());
        assertEquals(Optional.empty(), max.leaderEpoch(), "leader epoch of max timestamp in an empty partition");
    }

    private static void assertOffset(TopicPartition tp, String label, OffsetSpec spec, long offset, long timestamp)
            throws Exception {
        ListOffsetsResultInfo info = cluster.admin().listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
        String what = tp + " " + label;
        assertEquals(offset, info.offset(), what + " offset");
        assertEquals(timestamp, info.timestamp(), what + " timestamp");
    }

    @Test
    void listsDescribesAndDeletesAConsumerGroup() throws Exception {
        String topic = "admin-groups";
        String group = "admin-group";
        cluster.admin().createTopics(List.of(new NewTopic(topic, 3, (short) 3))).all().get();
        Map<Integer, Integer> perPartition = new HashMap<>();
        try (KafkaProducer<String, String> producer = Clients.producer(cluster.broker(), Map.of())) {
            for (int i = 0; i < 30; i++) {
                producer.send(new ProducerRecord<>(topic, i % 3, "k" + i, "v" + i));
                perPartition.merge(i % 3, 1, Integer::sum);
            }
        }
        Set<TopicPartition> partitions = IntStream.range(0, 3).mapToObj(p -> new TopicPartition(topic, p))
                .collect(Collectors.toSet());

        String memberId;
        try (KafkaConsumer<String, String> consumer = Clients.consumer(cluster.broker(), group, "admin-group-member")) {
            consumer.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> received = new ArrayList<>();
            Wait.until("the group member to get 3 partitions and read 30 records", () -> {
                consumer.poll(Duration.ofMillis(200)).forEach(received::add);
                return consumer.assignment().size() == 3 && received.size() >= 30;
            });
            assertEquals(30, received.size());
            consumer.commitSync();
            memberId = consumer.groupMetadata().memberId();

            Map<String, GroupListing> listed = cluster.admin().listGroups(ListGroupsOptions.forConsumerGroups())
                    .all().get().stream().collect(Collectors.toMap(GroupListing::groupId, g -> g));
            GroupListing listing = listed.get(group);
            assertNotNull(listing, "listGroups shows " + group + ": " + listed);
            assertEquals("consumer", listing.protocol());
            assertEquals(GroupType.CLASSIC, listing.type().orElseThrow());
            assertEquals(GroupState.STABLE, listing.groupState().orElseThrow());

            ConsumerGroupDescription description = cluster.admin().describeConsumerGroups(List.of(group))
                    .all().get().get(group);
            assertEquals(GroupState.STABLE, description.groupState());
            assertEquals(GroupType.CLASSIC, description.type());
            assertEquals("range", description.partitionAssignor());
            assertEquals(1, description.coordinator().id());
            assertFalse(description.isSimpleConsumerGroup());
            assertEquals(1, description.members().size());
            MemberDescription member = description.members().iterator().next();
            assertEquals(memberId, member.consumerId());
            assertEquals("admin-group-member", member.clientId());
            assertEquals(partitions, member.assignment().topicPartitions());

            Map<TopicPartition, OffsetAndMetadata> committed = cluster.admin().listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get();
            assertEquals(partitions, committed.keySet());
            for (TopicPartition tp : partitions) {
                assertEquals((long) perPartition.get(tp.partition()), committed.get(tp).offset(), "committed " + tp);
            }

            ExecutionException notEmpty = assertThrows(ExecutionException.class,
                    () -> cluster.admin().deleteConsumerGroups(List.of(group)).all().get());
            assertInstanceOf(GroupNotEmptyException.class, notEmpty.getCause());
        }

        // The member left on close: the group is empty but keeps its offsets.
        ConsumerGroupDescription afterClose = cluster.admin().describeConsumerGroups(List.of(group))
                .all().get().get(group);
        assertEquals(GroupState.EMPTY, afterClose.groupState());
        assertTrue(afterClose.members().isEmpty());
        assertEquals(partitions,
                cluster.admin().listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().keySet());

        // An operator rewinds the empty group's partition 0 to offset 4.
        TopicPartition first = new TopicPartition(topic, 0);
        cluster.admin().alterConsumerGroupOffsets(group, Map.of(first, new OffsetAndMetadata(4, "rewound")))
                .all().get();
        OffsetAndMetadata rewound = cluster.admin().listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                .get().get(first);
        assertEquals(4, rewound.offset());
        assertEquals("rewound", rewound.metadata());

        cluster.admin().deleteConsumerGroups(List.of(group)).all().get();
        Set<String> remaining = cluster.admin().listGroups(ListGroupsOptions.forConsumerGroups()).all().get().stream()
                .map(GroupListing::groupId).collect(Collectors.toSet());
        assertFalse(remaining.contains(group), "deleted group still listed: " + remaining);
        assertTrue(cluster.admin().listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().isEmpty(),
                "a deleted group has no committed offsets");
        ExecutionException gone = assertThrows(ExecutionException.class,
                () -> cluster.admin().describeConsumerGroups(List.of(group)).all().get());
        assertInstanceOf(GroupIdNotFoundException.class, gone.getCause());
    }

    @Test
    void deletesATopic() throws Exception {
        String topic = "admin-deleted";
        cluster.admin().createTopics(List.of(new NewTopic(topic, 2, (short) 3))).all().get();
        Uuid oldId = cluster.admin().describeTopics(List.of(topic)).allTopicNames().get().get(topic).topicId();
        try (KafkaProducer<String, String> producer = Clients.producer(cluster.broker(), Map.of())) {
            assertEquals(0, producer.send(new ProducerRecord<>(topic, 0, "k", "before delete")).get().offset());
        }

        cluster.admin().deleteTopics(List.of(topic)).all().get();
        Wait.until(topic + " to be gone from listTopics",
                () -> !cluster.admin().listTopics().names().get().contains(topic));
        ExecutionException described = assertThrows(ExecutionException.class,
                () -> cluster.admin().describeTopics(List.of(topic)).allTopicNames().get());
        assertInstanceOf(UnknownTopicOrPartitionException.class, described.getCause());
        assertEquals(null, cluster.broker().partition(topic, 0), "the broker no longer has " + topic + "-0");

        ExecutionException deletedAgain = assertThrows(ExecutionException.class,
                () -> cluster.admin().deleteTopics(List.of(topic)).all().get());
        assertInstanceOf(UnknownTopicOrPartitionException.class, deletedAgain.getCause());

        // Created again under the same name, it is a new topic: a new id, and empty.
        cluster.admin().createTopics(List.of(new NewTopic(topic, 1, (short) 3))).all().get();
        TopicDescription recreated = cluster.admin().describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        assertFalse(oldId.equals(recreated.topicId()), "the recreated topic kept the deleted one's id " + oldId);
        assertEquals(1, recreated.partitions().size());
        TopicPartition tp = new TopicPartition(topic, 0);
        assertEquals(0, cluster.latestOffset(tp));
    }

    private static List<Integer> ids(List<Node> nodes) {
        return nodes.stream().map(Node::id).toList();
    }
}
