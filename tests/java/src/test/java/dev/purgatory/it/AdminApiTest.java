package dev.purgatory.it;

import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConfigEntry.ConfigSource;
import org.apache.kafka.clients.admin.ConfigEntry.ConfigSynonym;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.DeleteConsumerGroupOffsetsResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupSubscribedToTopicException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.errors.UnknownMemberIdException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/*
 * The Java Admin client (kafka-clients 4.4) calls behind Kafka's administration tools
 * (issue 21 §3), against the broker: createPartitions (validateOnly, and a refusal of fewer
 * partitions), incrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT, validateOnly, bad
 * values), describeConfigs with synonyms (where each value comes from), deleteRecords (the
 * low watermark, -1 for the high watermark, a refusal above it), alterConsumerGroupOffsets
 * and deleteConsumerGroupOffsets (refused while a member is subscribed, done once the group
 * is empty) and describeLogDirs. Every answer is checked against what the test created,
 * produced or committed, and read back through another call (describe, ListOffsets, a
 * consumer).
 *
 * The expectations were checked against real Kafka 4.4 (scripts/kafka-reference.sh, three
 * brokers): run with PURGATORY_EXTERNAL_BOOTSTRAP=127.0.0.1:29091 to do that again. Names
 * carry a per-run suffix so that a rerun on that cluster starts afresh. Real Kafka's brokers
 * learn a change from its controller a moment after it is acknowledged, so a read-back
 * waits for the change to show (immediate on this broker).
 */
class AdminApiTest {
    private static final String RUN = Long.toString(System.currentTimeMillis() % 1_000_000_000L, 36);

    @RegisterExtension
    static final BrokerExtension cluster = new BrokerExtension();

    private static final AdminFixtures fx = new AdminFixtures(cluster, "admin-api-");

    // ---------------------------------------------------------------- createPartitions

    @Test
    void createPartitionsGrowsATopicAndRefusesFewer() throws Exception {
        String topic = "api-partitions-" + RUN;
        fx.createTopic(topic, 1);

        // validateOnly: accepted, nothing created.
        cluster.admin().createPartitions(Map.of(topic, NewPartitions.increaseTo(3)),
                new CreatePartitionsOptions().validateOnly(true)).all().get();
        assertEquals(1, fx.describeTopic(topic).partitions().size(), "validateOnly created no partition");
        InvalidPartitionsException same = failure(InvalidPartitionsException.class, cluster.admin()
                .createPartitions(Map.of(topic, NewPartitions.increaseTo(1)),
                        new CreatePartitionsOptions().validateOnly(true)).values().get(topic));
        assertEquals("Topic already has 1 partition(s).", same.getMessage());

        cluster.admin().createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
        Wait.until("describeTopics to show 3 partitions of " + topic, () -> fx.describeTopic(topic).partitions().size() == 3
                && fx.describeTopic(topic).partitions().stream().allMatch(p -> p.leader() != null));
        for (TopicPartitionInfo p : fx.describeTopic(topic).partitions()) {
            assertEquals(3, p.replicas().size(), p.toString());
            assertTrue(p.replicas().contains(p.leader()), p.toString());
        }

        // Fewer, or as many: INVALID_PARTITIONS, and the topic keeps its three.
        InvalidPartitionsException fewer = failure(InvalidPartitionsException.class, cluster.admin()
                .createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).values().get(topic));
        assertEquals("The topic " + topic + " currently has 3 partition(s); 2 would not be an increase.",
                fewer.getMessage());
        failure(InvalidPartitionsException.class, cluster.admin()
                .createPartitions(Map.of(topic, NewPartitions.increaseTo(2)),
                        new CreatePartitionsOptions().validateOnly(true)).values().get(topic));
        failure(InvalidPartitionsException.class, cluster.admin()
                .createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).values().get(topic));
        failure(UnknownTopicOrPartitionException.class, cluster.admin()
                .createPartitions(Map.of("api-no-such-topic-" + RUN, NewPartitions.increaseTo(3))).all());
        assertEquals(3, fx.describeTopic(topic).partitions().size());

        // The new partitions take records and answer ListOffsets.
        fx.produce(topic, 2, 4);
        assertEquals(4, cluster.latestOffset(new TopicPartition(topic, 2)));
        assertEquals(0, cluster.latestOffset(new TopicPartition(topic, 1)));
    }

    // ---------------------------------------------------------------- incrementalAlterConfigs

    @Test
    void incrementalAlterConfigsSetsDeletesAppendsAndSubtracts() throws Exception {
        String topic = "api-alter-configs-" + RUN;
        fx.createTopic(topic, 1);
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);

        alter(resource, new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET));
        ConfigEntry retention = awaitValue(resource, "retention.ms", "1000");
        assertEquals(ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source());
        assertFalse(retention.isDefault());

        // validateOnly: accepted, not applied (the next change shows it was not).
        cluster.admin().incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                        new ConfigEntry("retention.ms", "2000"), AlterConfigOp.OpType.SET))),
                new AlterConfigsOptions().validateOnly(true)).all().get();

        // cleanup.policy is a list: APPEND adds to it, SUBTRACT takes away, DELETE restores the default.
        alter(resource, new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.SET));
        assertEquals(ConfigSource.DYNAMIC_TOPIC_CONFIG, awaitValue(resource, "cleanup.policy", "delete").source());
        assertEquals("1000", describe(resource).get("retention.ms").value(), "validateOnly changed nothing");
        alter(resource, new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND));
        awaitValue(resource, "cleanup.policy", "delete,compact");
        alter(resource, new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND));
        awaitValue(resource, "cleanup.policy", "delete,compact"); // already there: not added twice
        alter(resource, new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.SUBTRACT));
        assertEquals(ConfigSource.DYNAMIC_TOPIC_CONFIG, awaitValue(resource, "cleanup.policy", "compact").source());
        alter(resource, new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE),
                new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE));
        ConfigEntry cleanup = awaitValue(resource, "cleanup.policy", "delete");
        assertEquals(ConfigSource.DEFAULT_CONFIG, cleanup.source());
        assertTrue(cleanup.isDefault());
        ConfigEntry restored = awaitValue(resource, "retention.ms", "604800000"); // Kafka's default, 7 days
        assertEquals(ConfigSource.DEFAULT_CONFIG, restored.source());
        // APPEND to a list that is not set on the topic appends to the default.
        alter(resource, new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND));
        awaitValue(resource, "cleanup.policy", "delete,compact");

        // Refused, each with INVALID_CONFIG: not a number, not a policy, no such config, and
        // APPEND to a config that is not a list. Nothing is changed.
        List<AlterConfigOp> bad = List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "abc"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "bogus"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("retention.ms", "1"), AlterConfigOp.OpType.APPEND));
        for (AlterConfigOp op : bad) {
            InvalidConfigurationException e = failure(InvalidConfigurationException.class, cluster.admin()
                    .incrementalAlterConfigs(Map.of(resource, List.of(op))).values().get(resource));
            assertNotNull(e.getMessage(), op.toString());
        }
        Config after = describe(resource);
        assertEquals("604800000", after.get("retention.ms").value());
        assertEquals("delete,compact", after.get("cleanup.policy").value());

        failure(UnknownTopicOrPartitionException.class, cluster.admin().incrementalAlterConfigs(Map.of(
                new ConfigResource(ConfigResource.Type.TOPIC, "api-no-such-topic-" + RUN),
                List.of(new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET)))).all());
    }

    // ---------------------------------------------------------------- describeConfigs + synonyms

    @Test
    void describeConfigsWithSynonymsShowsWhereEachValueComesFrom() throws Exception {
        String topic = "api-describe-configs-" + RUN;
        cluster.admin().createTopics(List.of(new NewTopic(topic, 1, (short) 3)
                .configs(Map.of("retention.ms", "1000", "min.insync.replicas", "2")))).all().get();
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config config = awaitDescribe(resource, true);
        assertEquals(AdminToolsTest.TOPIC_CONFIGS, config.entries().stream().map(ConfigEntry::name)
                .collect(Collectors.toCollection(TreeSet::new)), "every topic config is described");
        for (ConfigEntry entry : config.entries()) {
            assertFalse(entry.isSensitive(), entry.toString());
            assertFalse(entry.isReadOnly(), "a topic config can be altered: " + entry);
            if (!entry.synonyms().isEmpty()) {
                // The first synonym is where the value comes from.
                ConfigSynonym first = entry.synonyms().get(0);
                assertEquals(entry.source(), first.source(), entry.toString());
                assertEquals(entry.value(), first.value(), entry.toString());
            }
        }

        ConfigEntry retention = config.get("retention.ms");
        assertEquals("1000", retention.value());
        assertEquals(ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source());
        assertEquals(ConfigEntry.ConfigType.LONG, retention.type());
        assertEquals(List.of(synonym("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)),
                synonyms(retention), "only the override: log.retention.* are not listed");

        ConfigEntry minIsr = config.get("min.insync.replicas");
        assertEquals(ConfigSource.DYNAMIC_TOPIC_CONFIG, minIsr.source());
        List<String> minIsrSynonyms = synonyms(minIsr);
        assertEquals(synonym("min.insync.replicas", "2", ConfigSource.DYNAMIC_TOPIC_CONFIG), minIsrSynonyms.get(0));
        // The broker's setting: STATIC_BROKER_CONFIG on Kafka (its file sets it), DEFAULT_CONFIG
        // here (2 is this broker's built-in default).
        assertTrue(minIsrSynonyms.contains(synonym("min.insync.replicas", "2", ConfigSource.STATIC_BROKER_CONFIG))
                        || minIsrSynonyms.contains(synonym("min.insync.replicas", "2", ConfigSource.DEFAULT_CONFIG)),
                "below the override, the broker's own setting: " + minIsrSynonyms);
        // Last, the built-in default: Kafka's is 1, this broker's 2 (what it runs with when
        // broker.toml leaves the key out).
        String builtIn = minIsrSynonyms.get(minIsrSynonyms.size() - 1);
        assertTrue(builtIn.equals(synonym("min.insync.replicas", "1", ConfigSource.DEFAULT_CONFIG))
                        || builtIn.equals(synonym("min.insync.replicas", "2", ConfigSource.DEFAULT_CONFIG)),
                "and last the built-in default: " + minIsrSynonyms);

        // Not set on the topic: the broker config it comes from, under the broker's name for it.
        ConfigEntry cleanup = config.get("cleanup.policy");
        assertEquals(ConfigSource.DEFAULT_CONFIG, cleanup.source());
        assertEquals(List.of(synonym("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG)), synonyms(cleanup));
        assertEquals(ConfigEntry.ConfigType.LIST, cleanup.type());
        assertEquals(List.of(synonym("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG)),
                synonyms(config.get("segment.bytes")));

        // Without includeSynonyms: the same values, no synonyms.
        Config plain = awaitDescribe(resource, false);
        assertEquals(config.entries().size(), plain.entries().size());
        for (ConfigEntry entry : plain.entries()) {
            assertEquals(List.of(), entry.synonyms(), entry.toString());
            assertEquals(config.get(entry.name()).value(), entry.value(), entry.name());
            assertEquals(config.get(entry.name()).source(), entry.source(), entry.name());
        }

        // The broker's own config, with synonyms.
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
        Config brokerConfig = awaitDescribe(broker, true);
        ConfigEntry brokerMinIsr = brokerConfig.get("min.insync.replicas");
        assertEquals("2", brokerMinIsr.value());
        assertTrue(synonyms(brokerMinIsr).contains(synonym("min.insync.replicas", "2", ConfigSource.STATIC_BROKER_CONFIG))
                        || synonyms(brokerMinIsr).contains(synonym("min.insync.replicas", "2", ConfigSource.DEFAULT_CONFIG)),
                brokerMinIsr.toString());
        ConfigEntry replication = brokerConfig.get("default.replication.factor");
        assertTrue(synonyms(replication).get(0).endsWith(":default.replication.factor=3"), synonyms(replication).toString());
        if (BrokerExtension.externalBootstrap() != null) {
            // Kafka's own defaults, and a config this broker does not have (it lists only
            // the settings it runs with: docs/differences.md).
            assertEquals(synonym("default.replication.factor", "1", ConfigSource.DEFAULT_CONFIG),
                    synonyms(replication).get(1));
            ConfigEntry hours = brokerConfig.get("log.retention.hours");
            assertEquals(ConfigSource.DEFAULT_CONFIG, hours.source());
            assertEquals("168", hours.value());
        }

        failure(UnknownTopicOrPartitionException.class, cluster.admin().describeConfigs(List.of(
                new ConfigResource(ConfigResource.Type.TOPIC, "api-no-such-topic-" + RUN))).all());
    }

    // ---------------------------------------------------------------- deleteRecords

    @Test
    void deleteRecordsMovesTheLowWatermark() throws Exception {
        String topic = "api-delete-records-" + RUN;
        fx.createTopic(topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        fx.produce(topic, 0, 10);

        assertEquals(4, lowWatermark(tp, RecordsToDelete.beforeOffset(4)));
        assertEquals(4, fx.earliestOffset(tp));
        assertEquals(10, cluster.latestOffset(tp));
        assertEquals(List.of(4L, 5L, 6L, 7L, 8L, 9L), fx.readOffsets(tp, 10), "a consumer reads from the low watermark");

        // Below the low watermark: nothing more is deleted, the low watermark is answered.
        assertEquals(4, lowWatermark(tp, RecordsToDelete.beforeOffset(2)));
        // Above the high watermark: OFFSET_OUT_OF_RANGE.
        failure(OffsetOutOfRangeException.class, cluster.admin().deleteRecords(
                Map.of(tp, RecordsToDelete.beforeOffset(11))).lowWatermarks().get(tp));
        assertEquals(4, fx.earliestOffset(tp));
        // -1 is the high watermark: everything goes.
        assertEquals(10, lowWatermark(tp, RecordsToDelete.beforeOffset(-1)));
        assertEquals(10, fx.earliestOffset(tp));
        assertEquals(10, cluster.latestOffset(tp));

        // The log goes on from there.
        fx.produce(topic, 0, 2);
        assertEquals(10, fx.earliestOffset(tp));
        assertEquals(12, cluster.latestOffset(tp));
        assertEquals(List.of(10L, 11L), fx.readOffsets(tp, 12));
        // (A partition that does not exist is not tried here: the Admin client retries its
        // leader lookup until default.api.timeout.ms and fails with a TimeoutException.)
    }

    // ---------------------------------------------------------------- group offsets

    @Test
    void alterAndDeleteConsumerGroupOffsets() throws Exception {
        String topic = "api-group-offsets-" + RUN;
        String group = "api-group-" + RUN;
        fx.createTopic(topic, 2);
        fx.produce(topic, 0, 5);
        fx.produce(topic, 1, 5);
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);

        try (KafkaConsumer<String, String> member = fx.consumer(group)) {
            member.subscribe(List.of(topic));
            int read = 0;
            long deadline = System.nanoTime() + Wait.DEFAULT.toNanos();
            while (read < 10) {
                assertTrue(System.nanoTime() < deadline, "timed out reading the 10 records; read " + read);
                read += member.poll(Duration.ofMillis(200)).count();
            }
            member.commitSync();
            assertEquals(Map.of(p0, 5L, p1, 5L), fx.committed(group));
            fx.awaitGroupState(group, GroupState.STABLE);

            // A member is subscribed: the Admin (no member, no generation) may not commit for
            // the group, nor delete the offsets of the topic.
            failure(UnknownMemberIdException.class, cluster.admin().alterConsumerGroupOffsets(group,
                    Map.of(p0, new OffsetAndMetadata(1))).partitionResult(p0));
            DeleteConsumerGroupOffsetsResult refused = cluster.admin().deleteConsumerGroupOffsets(group, Set.of(p0));
            failure(GroupSubscribedToTopicException.class, refused.partitionResult(p0));
            failure(GroupSubscribedToTopicException.class, refused.all());
            assertEquals(Map.of(p0, 5L, p1, 5L), fx.committed(group), "nothing was changed");
        }
        fx.awaitGroupState(group, GroupState.EMPTY);

        // The group is empty: the Admin commits, with metadata, and deletes.
        cluster.admin().alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(2, "two"),
                p1, new OffsetAndMetadata(3))).all().get();
        Map<TopicPartition, OffsetAndMetadata> altered = cluster.admin().listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get();
        assertEquals(2, altered.get(p0).offset());
        assertEquals("two", altered.get(p0).metadata());
        assertEquals(3, altered.get(p1).offset());
        assertEquals("", altered.get(p1).metadata());

        cluster.admin().deleteConsumerGroupOffsets(group, Set.of(p0)).all().get();
        assertEquals(Map.of(p1, 3L), fx.committed(group));
        // A consumer of the group starts p0 afresh (auto.offset.reset=earliest) and p1 at 3.
        try (KafkaConsumer<String, String> resumed = fx.consumer(group)) {
            resumed.subscribe(List.of(topic));
            Map<Integer, Long> first = new TreeMap<>();
            long deadline = System.nanoTime() + Wait.DEFAULT.toNanos();
            while (first.size() < 2) {
                assertTrue(System.nanoTime() < deadline, "timed out reading both partitions; first " + first);
                for (ConsumerRecord<String, String> r : resumed.poll(Duration.ofMillis(200))) {
                    first.putIfAbsent(r.partition(), r.offset());
                }
            }
            assertEquals(Map.of(0, 0L, 1, 3L), first);
        }
        fx.awaitGroupState(group, GroupState.EMPTY);

        cluster.admin().deleteConsumerGroupOffsets(group, Set.of(p1)).all().get();
        assertEquals(Map.of(), fx.committed(group));

        // A group that does not exist has no offsets to delete; committing creates it.
        String other = "api-group-new-" + RUN;
        failure(GroupIdNotFoundException.class, cluster.admin().deleteConsumerGroupOffsets(other, Set.of(p0)).all());
        cluster.admin().alterConsumerGroupOffsets(other, Map.of(p1, new OffsetAndMetadata(4))).all().get();
        assertEquals(Map.of(p1, 4L), fx.committed(other));
    }

    // ---------------------------------------------------------------- describeLogDirs

    @Test
    void describeLogDirsShowsEveryReplicaWithItsSize() throws Exception {
        String topic = "api-log-dirs-" + RUN;
        fx.createTopic(topic, 2);
        fx.produce(topic, 0, 20);
        fx.produce(topic, 1, 5);
        Map<Integer, TopicPartitionInfo> partitions = new TreeMap<>();
        for (TopicPartitionInfo info : fx.describeTopic(topic).partitions()) {
            partitions.put(info.partition(), info);
        }
        List<Integer> brokers = cluster.admin().describeCluster().nodes().get().stream().map(Node::id).sorted().toList();

        // Each partition's replicas on brokers in the cluster's metadata (real Kafka's three;
        // this broker lists only itself, its simulated followers are no brokers a client can
        // reach), each on the broker that holds it, with bytes in it (a follower's once it
        // has fetched them: acks=all waited only for the ISR).
        Map<TopicPartition, Set<Integer>> holders = new HashMap<>();
        for (TopicPartitionInfo info : partitions.values()) {
            holders.put(new TopicPartition(topic, info.partition()), info.replicas().stream().map(Node::id)
                    .filter(brokers::contains).collect(Collectors.toCollection(TreeSet::new)));
        }
        AtomicReference<Map<Integer, Map<String, LogDirDescription>>> described = new AtomicReference<>();
        Wait.until("describeLogDirs to show every replica of " + topic + " with size > 0", () -> {
            described.set(cluster.admin().describeLogDirs(brokers).allDescriptions().get());
            Map<TopicPartition, Map<Integer, ReplicaInfo>> replicas = replicas(described.get(), topic);
            return replicas.keySet().equals(holders.keySet()) && replicas.entrySet().stream()
                    .allMatch(e -> e.getValue().keySet().equals(holders.get(e.getKey()))
                            && e.getValue().values().stream().allMatch(i -> i.size() > 0));
        });
        assertEquals(new TreeSet<>(brokers), new TreeSet<>(described.get().keySet()), "every broker answered");
        for (Map.Entry<Integer, Map<String, LogDirDescription>> broker : described.get().entrySet()) {
            assertFalse(broker.getValue().isEmpty(), "broker " + broker.getKey() + " has a log dir");
            for (Map.Entry<String, LogDirDescription> dir : broker.getValue().entrySet()) {
                assertFalse(dir.getKey().isEmpty());
                assertNull(dir.getValue().error(), dir.toString());
            }
        }
        Map<TopicPartition, Map<Integer, ReplicaInfo>> replicas = replicas(described.get(), topic);
        for (TopicPartitionInfo info : partitions.values()) {
            TopicPartition tp = new TopicPartition(topic, info.partition());
            Map<Integer, ReplicaInfo> held = replicas.get(tp);
            assertTrue(holders.get(tp).contains(info.leader().id()), info.toString());
            assertEquals(holders.get(tp), held.keySet(), tp + " is in the log dirs of exactly its replicas");
            for (ReplicaInfo r : held.values()) {
                assertFalse(r.isFuture(), r.toString());
                assertTrue(r.offsetLag() >= 0, r.toString());
            }
            assertEquals(0, held.get(info.leader().id()).offsetLag(), "the leader lags nobody: " + held);
        }
        long size0 = replicas.get(new TopicPartition(topic, 0)).get(partitions.get(0).leader().id()).size();
        long size1 = replicas.get(new TopicPartition(topic, 1)).get(partitions.get(1).leader().id()).size();
        assertTrue(size0 > size1, "20 records take more bytes than 5: " + size0 + " vs " + size1);
    }

    // ---------------------------------------------------------------- helpers

    /** The future fails with an ExecutionException caused by {@code type}; returns that cause. */
    private static <T extends Throwable> T failure(Class<T> type, Future<?> future) {
        ExecutionException e = assertThrows(ExecutionException.class, future::get,
                "expected " + type.getSimpleName());
        return assertInstanceOf(type, e.getCause(), "cause of " + e);
    }

    private static void alter(ConfigResource resource, AlterConfigOp... ops) throws Exception {
        Collection<AlterConfigOp> list = List.of(ops);
        cluster.admin().incrementalAlterConfigs(Map.of(resource, list)).all().get();
    }

    private static Config describe(ConfigResource resource) throws Exception {
        return cluster.admin().describeConfigs(List.of(resource)).all().get().get(resource);
    }

    /** The resource's config, once the broker answering knows it (real Kafka's learn a new topic a moment later). */
    private static Config awaitDescribe(ConfigResource resource, boolean synonyms) throws Exception {
        AtomicReference<Config> config = new AtomicReference<>();
        Wait.until("describeConfigs to know " + resource, () -> {
            config.set(describeOrNull(resource, synonyms));
            return config.get() != null;
        });
        return config.get();
    }

    private static Config describeOrNull(ConfigResource resource, boolean synonyms) throws Exception {
        try {
            return cluster.admin().describeConfigs(List.of(resource), new DescribeConfigsOptions()
                    .includeSynonyms(synonyms)).all().get().get(resource);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                return null;
            }
            throw e;
        }
    }

    /** Waits until the config shows {@code value} (real Kafka's brokers apply a change a moment later). */
    private static ConfigEntry awaitValue(ConfigResource resource, String name, String value) throws Exception {
        ConfigEntry[] last = new ConfigEntry[1];
        try {
            Wait.until(resource + " " + name + " to be " + value, () -> {
                last[0] = describe(resource).get(name);
                return last[0] != null && value.equals(last[0].value());
            });
        } catch (AssertionError e) {
            throw new AssertionError(e.getMessage() + "; last: " + last[0], e);
        }
        return last[0];
    }

    private static String synonym(String name, String value, ConfigSource source) {
        return source + ":" + name + "=" + value;
    }

    private static List<String> synonyms(ConfigEntry entry) {
        return entry.synonyms().stream().map(s -> synonym(s.name(), s.value(), s.source())).toList();
    }

    private static long lowWatermark(TopicPartition tp, RecordsToDelete before) throws Exception {
        return cluster.admin().deleteRecords(Map.of(tp, before)).lowWatermarks().get(tp).get().lowWatermark();
    }

    private static Map<TopicPartition, Map<Integer, ReplicaInfo>> replicas(
            Map<Integer, Map<String, LogDirDescription>> dirs, String topic) {
        Map<TopicPartition, Map<Integer, ReplicaInfo>> replicas = new HashMap<>();
        for (Map.Entry<Integer, Map<String, LogDirDescription>> broker : dirs.entrySet()) {
            for (LogDirDescription dir : broker.getValue().values()) {
                for (Map.Entry<TopicPartition, ReplicaInfo> r : dir.replicaInfos().entrySet()) {
                    if (r.getKey().topic().equals(topic)) {
                        replicas.computeIfAbsent(r.getKey(), k -> new TreeMap<>()).put(broker.getKey(), r.getValue());
                    }
                }
            }
        }
        return replicas;
    }
}
