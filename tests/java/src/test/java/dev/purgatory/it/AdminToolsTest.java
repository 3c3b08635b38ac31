package dev.purgatory.it;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/*
 * Kafka's own administration tools (kafka-tools 4.4: kafka-topics, kafka-configs,
 * kafka-delete-records, kafka-consumer-groups, kafka-log-dirs), each its own JVM as an
 * operator would run them, against the broker (issue 21 §3): adding partitions, altering,
 * deleting and describing topic configs (every topic config, with where each value comes
 * from) and broker configs, deleting records below an offset, resetting and deleting a
 * group's committed offsets, and describing log directories. Each tool's printed answer is
 * parsed and checked against what the test created or produced, and against what the Java
 * Admin client reads back. Refusals are checked too: fewer partitions, a bad config value,
 * an offset above the high watermark, deleting the offsets of a topic a member is
 * subscribed to. The tools report some refusals with exit code 0 and an error line, as
 * Kafka 4.4's do.
 *
 * The expectations were checked against real Kafka 4.4 (scripts/kafka-reference.sh, three
 * brokers): run with PURGATORY_EXTERNAL_BOOTSTRAP=127.0.0.1:29091 to do that again. Topic
 * and group names carry a per-run suffix so that a rerun on that cluster starts afresh.
 * Real Kafka spreads metadata to its brokers asynchronously, so a describe right after a
 * change is repeated until it shows the change (immediate on this broker).
 */
class AdminToolsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String RUN = Long.toString(System.currentTimeMillis() % 1_000_000_000L, 36);
    private static final long TOOL_TIMEOUT_S = 180;

    private static final String TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand";
    private static final String CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand";
    private static final String DELETE_RECORDS_COMMAND = "org.apache.kafka.tools.DeleteRecordsCommand";
    private static final String GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    private static final String LOG_DIRS_COMMAND = "org.apache.kafka.tools.LogDirsCommand";

    /** Every config `kafka-configs --describe --entity-type topics --all` lists on Kafka 4.4. */
    static final Set<String> TOPIC_CONFIGS = Set.of(
            "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
            "compression.zstd.level", "delete.retention.ms", "errors.deadletterqueue.group.enable",
            "file.delete.delay.ms", "flush.messages", "flush.ms", "follower.replication.throttled.replicas",
            "index.interval.bytes", "leader.replication.throttled.replicas", "local.retention.bytes",
            "local.retention.ms", "max.compaction.lag.ms", "max.decompressed.message.bytes", "max.message.bytes",
            "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
            "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
            "remote.copy.lag.bytes", "remote.copy.lag.ms", "remote.log.copy.disable",
            "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
            "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
            "unclean.leader.election.enable");

    @RegisterExtension
    static final BrokerExtension cluster = new BrokerExtension();

    private static final AdminFixtures fx = new AdminFixtures(cluster, "admin-tools-");

    // ---------------------------------------------------------------- kafka-topics --alter

    @Test
    void topicCommandAddsPartitionsAndRefusesFewer() throws Exception {
        String topic = "tools-partitions-" + RUN;
        fx.createTopic(topic, 1);

        KafkaTool.Result alter = tool("topics-alter", TOPIC_COMMAND, "--bootstrap-server", cluster.bootstrap(),
                "--alter", "--topic", topic, "--partitions", "3");
        assertEquals(0, alter.exitCode(), alter.describe());

        KafkaTool.Result described = runUntil("kafka-topics --describe to show 3 partitions of " + topic,
                "topics-describe", TOPIC_COMMAND,
                List.of("--bootstrap-server", cluster.bootstrap(), "--describe", "--topic", topic),
                r -> r.exitCode() == 0 && "3".equals(topicLine(r, topic).get("PartitionCount")));
        Map<String, String> header = topicLine(described, topic);
        assertEquals("3", header.get("ReplicationFactor"), described.stdout().toString());
        assertNotNull(header.get("TopicId"), described.stdout().toString());
        Map<Integer, Map<String, String>> partitions = partitionLines(described, topic);
        assertEquals(Set.of(0, 1, 2), partitions.keySet(), "one line per partition: " + described.stdout());
        for (Map.Entry<Integer, Map<String, String>> e : partitions.entrySet()) {
            List<String> replicas = Arrays.asList(e.getValue().get("Replicas").split(","));
            assertEquals(3, replicas.size(), "partition " + e.getKey() + ": " + e.getValue());
            assertTrue(replicas.contains(e.getValue().get("Leader")), "partition " + e.getKey()
                    + ": the leader is one of its replicas: " + e.getValue());
            assertFalse(e.getValue().get("Isr").isEmpty(), "partition " + e.getKey() + ": " + e.getValue());
        }
        // The Admin client sees the same three partitions, and the new ones take records.
        Wait.until("describeTopics to show 3 partitions of " + topic, () -> partitionCount(topic) == 3);
        fx.produce(topic, 2, 5);
        assertEquals(5, cluster.latestOffset(new TopicPartition(topic, 2)));

        // Fewer partitions, or as many: refused, with exit code 1.
        for (String count : List.of("2", "3")) {
            KafkaTool.Result refused = tool("topics-alter-" + count, TOPIC_COMMAND, "--bootstrap-server",
                    cluster.bootstrap(), "--alter", "--topic", topic, "--partitions", count);
            assertEquals(1, refused.exitCode(), refused.describe());
            assertTrue(String.join("\n", refused.stdout()).contains("Error while executing topic command"),
                    refused.stdout().toString());
            assertTrue(stderr(refused).contains("org.apache.kafka.common.errors.InvalidPartitionsException"),
                    refused.describe());
        }
        assertEquals(3, partitionCount(topic));
    }

    // ---------------------------------------------------------------- kafka-configs

    @Test
    void configCommandAltersDeletesAndDescribesEveryTopicConfig() throws Exception {
        String topic = "tools-configs-" + RUN;
        fx.createTopic(topic, 1);
        List<String> describeAll = List.of("--bootstrap-server", cluster.bootstrap(), "--describe",
                "--entity-type", "topics", "--entity-name", topic, "--all");
        List<String> describeDynamic = List.of("--bootstrap-server", cluster.bootstrap(), "--describe",
                "--entity-type", "topics", "--entity-name", topic);

        KafkaTool.Result added = tool("configs-add", CONFIG_COMMAND, "--bootstrap-server", cluster.bootstrap(),
                "--alter", "--entity-type", "topics", "--entity-name", topic,
                "--add-config", "retention.ms=1000,min.insync.replicas=2");
        assertEquals(0, added.exitCode(), added.describe());
        assertEquals(List.of("Completed updating config for topic " + topic + "."), added.stdout());

        String allHeader = "All configs for topic " + topic + " are:";
        KafkaTool.Result all = runUntil("kafka-configs --describe --all to show retention.ms=1000", "configs-describe-all",
                CONFIG_COMMAND, describeAll,
                r -> r.exitCode() == 0 && "1000".equals(value(configs(r, allHeader), "retention.ms")));
        Map<String, ConfigLine> configs = configs(all, allHeader);
        assertEquals(new TreeSet<>(TOPIC_CONFIGS), new TreeSet<>(configs.keySet()), "every topic config is listed");
        ConfigLine retention = configs.get("retention.ms");
        assertEquals("DYNAMIC_TOPIC_CONFIG:retention.ms=1000", retention.synonyms().get(0), retention.toString());
        ConfigLine minIsr = configs.get("min.insync.replicas");
        assertEquals("2", minIsr.value());
        assertEquals("DYNAMIC_TOPIC_CONFIG:min.insync.replicas=2", minIsr.synonyms().get(0), minIsr.toString());
        assertTrue(minIsr.synonyms().stream().anyMatch(s -> brokerLevel("min.insync.replicas", "2").contains(s)),
                "the broker's own setting is a synonym below the override: " + minIsr);
        for (ConfigLine line : configs.values()) {
            assertFalse(line.sensitive(), line.toString());
            if (!Set.of("retention.ms", "min.insync.replicas").contains(line.name())) {
                assertTrue(line.synonyms().stream().noneMatch(s -> s.startsWith("DYNAMIC_TOPIC_CONFIG:")),
                        "not set on the topic: " + line);
            }
            if (!line.synonyms().isEmpty()) {
                // The first synonym is where the value comes from.
                String first = line.synonyms().get(0);
                assertTrue(first.endsWith("=" + line.value()), "the first synonym holds the value: " + line);
            }
        }
        assertEquals("delete", configs.get("cleanup.policy").value());
        assertEquals(List.of("DEFAULT_CONFIG:log.cleanup.policy=delete"), configs.get("cleanup.policy").synonyms());

        // Without --all: only the topic's own overrides.
        String dynamicHeader = "Dynamic configs for topic " + topic + " are:";
        KafkaTool.Result dynamic = runUntil("kafka-configs --describe to show both overrides", "configs-describe",
                CONFIG_COMMAND, describeDynamic, r -> r.exitCode() == 0 && configs(r, dynamicHeader).size() == 2);
        assertEquals(Set.of("min.insync.replicas", "retention.ms"), configs(dynamic, dynamicHeader).keySet());
        assertEquals("1000", value(configs(dynamic, dynamicHeader), "retention.ms"));

        // A value that is not a number, a name that is no topic config: refused, nothing changed.
        for (String bad : List.of("retention.ms=abc", "no.such.config=1")) {
            KafkaTool.Result refused = tool("configs-add-bad", CONFIG_COMMAND, "--bootstrap-server",
                    cluster.bootstrap(), "--alter", "--entity-type", "topics", "--entity-name", topic,
                    "--add-config", bad);
            assertEquals(1, refused.exitCode(), refused.describe());
            assertTrue(stderr(refused).contains("org.apache.kafka.common.errors.InvalidConfigurationException"),
                    refused.describe());
        }

        KafkaTool.Result deleted = tool("configs-delete", CONFIG_COMMAND, "--bootstrap-server", cluster.bootstrap(),
                "--alter", "--entity-type", "topics", "--entity-name", topic,
                "--delete-config", "retention.ms,min.insync.replicas");
        assertEquals(0, deleted.exitCode(), deleted.describe());
        assertEquals(List.of("Completed updating config for topic " + topic + "."), deleted.stdout());
        runUntil("kafka-configs --describe to show no overrides of " + topic, "configs-describe", CONFIG_COMMAND,
                describeDynamic, r -> r.exitCode() == 0 && configs(r, dynamicHeader).isEmpty());

        KafkaTool.Result after = runUntil("kafka-configs --describe --all to show retention.ms back at its default",
                "configs-describe-all", CONFIG_COMMAND, describeAll,
                r -> r.exitCode() == 0 && "604800000".equals(value(configs(r, allHeader), "retention.ms")));
        Map<String, ConfigLine> defaults = configs(after, allHeader);
        assertEquals(new TreeSet<>(TOPIC_CONFIGS), new TreeSet<>(defaults.keySet()));
        assertEquals("604800000", defaults.get("retention.ms").value(), "Kafka's default retention, 7 days");
        assertEquals("2", defaults.get("min.insync.replicas").value(), "the broker's own min.insync.replicas");
        assertTrue(defaults.get("min.insync.replicas").synonyms().stream()
                        .anyMatch(s -> brokerLevel("min.insync.replicas", "2").contains(s)),
                defaults.get("min.insync.replicas").toString());
        for (ConfigLine line : defaults.values()) {
            assertTrue(line.synonyms().stream().noneMatch(s -> s.startsWith("DYNAMIC_TOPIC_CONFIG:")),
                    "no override is left: " + line);
        }
    }

    @Test
    void configCommandDescribesTheBrokersConfigs() throws Exception {
        String header = "All configs for broker 1 are:";
        KafkaTool.Result described = tool("configs-describe-broker", CONFIG_COMMAND, "--bootstrap-server",
                cluster.bootstrap(), "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all");
        assertEquals(0, described.exitCode(), described.describe());
        Map<String, ConfigLine> configs = configs(described, header);

        // As config/broker.toml (and the reference cluster's server.properties) set them.
        assertEquals("1", value(configs, "broker.id"));
        assertStatic(configs, "default.replication.factor", "3");
        assertStatic(configs, "num.partitions", "1");
        assertStatic(configs, "auto.create.topics.enable", "true");
        assertStatic(configs, "group.initial.rebalance.delay.ms", "0");
        assertStatic(configs, "offsets.topic.replication.factor", "3");
        assertEquals("2", value(configs, "min.insync.replicas"));
        assertTrue(configs.get("min.insync.replicas").synonyms().stream()
                        .anyMatch(s -> brokerLevel("min.insync.replicas", "2").contains(s)),
                configs.get("min.insync.replicas").toString());
        // The built-in default comes last: Kafka's is 1, this broker's 2 (what it runs with
        // when broker.toml leaves the key out).
        String builtIn = last(configs.get("min.insync.replicas").synonyms());
        assertTrue(builtIn.equals("DEFAULT_CONFIG:min.insync.replicas=1")
                        || builtIn.equals("DEFAULT_CONFIG:min.insync.replicas=2"),
                "the built-in default comes last: " + configs.get("min.insync.replicas"));
        if (BrokerExtension.externalBootstrap() != null) {
            // Not set anywhere: Kafka's defaults, of a config this broker does not have (it
            // lists only the settings it runs with: docs/differences.md).
            assertEquals("168", value(configs, "log.retention.hours"));
            assertEquals(List.of("DEFAULT_CONFIG:log.retention.hours=168"), configs.get("log.retention.hours").synonyms());
        }
        assertEquals("1048588", value(configs, "message.max.bytes"));
        for (ConfigLine line : configs.values()) {
            if (line.sensitive()) {
                assertEquals("null", line.value(), "a sensitive value is never shown: " + line);
            }
        }
    }

    // ---------------------------------------------------------------- kafka-delete-records

    @Test
    void deleteRecordsCommandMovesTheLowWatermark() throws Exception {
        String topic = "tools-delete-records-" + RUN;
        fx.createTopic(topic, 2);
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        fx.produce(topic, 0, 10);
        fx.produce(topic, 1, 6);

        KafkaTool.Result deleted = deleteRecords("delete-records", topic, Map.of(0, 4L));
        assertEquals(0, deleted.exitCode(), deleted.describe());
        assertEquals(List.of("Executing records delete operation", "Records delete operation completed:",
                "partition: " + topic + "-0\tlow_watermark: 4"), deleted.stdout());
        assertEquals(4, fx.earliestOffset(p0));
        assertEquals(10, cluster.latestOffset(p0));
        assertEquals(0, fx.earliestOffset(p1), "the other partition keeps its records");
        assertEquals(List.of(4L, 5L, 6L, 7L, 8L, 9L), fx.readOffsets(p0, 10), "a consumer reads from the low watermark");

        // Above the high watermark: that partition's error is printed, and the tool still
        // exits 0. Offset -1 deletes up to the high watermark.
        KafkaTool.Result mixed = deleteRecords("delete-records-mixed", topic, Map.of(0, 11L, 1, -1L));
        assertEquals(0, mixed.exitCode(), mixed.describe());
        Map<String, String> lines = deleteRecordsLines(mixed);
        assertEquals(Set.of(topic + "-0", topic + "-1"), lines.keySet(), mixed.stdout().toString());
        assertTrue(lines.get(topic + "-0").startsWith(
                "error: org.apache.kafka.common.errors.OffsetOutOfRangeException"), mixed.stdout().toString());
        assertEquals("low_watermark: 6", lines.get(topic + "-1"), mixed.stdout().toString());
        assertEquals(4, fx.earliestOffset(p0));
        assertEquals(6, fx.earliestOffset(p1));
        assertEquals(6, cluster.latestOffset(p1));

        // Below the low watermark: nothing to delete, the low watermark is answered as it is.
        KafkaTool.Result below = deleteRecords("delete-records-below", topic, Map.of(0, 2L));
        assertEquals(0, below.exitCode(), below.describe());
        assertEquals(Map.of(topic + "-0", "low_watermark: 4"), deleteRecordsLines(below));
    }

    // ---------------------------------------------------------------- kafka-consumer-groups

    @Test
    void consumerGroupCommandResetsDescribesAndDeletesOffsets() throws Exception {
        String topic = "tools-groups-" + RUN;
        String group = "tools-group-" + RUN;
        fx.createTopic(topic, 2);
        fx.produce(topic, 0, 10);
        fx.produce(topic, 1, 10);
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);

        // A member reads everything and commits, then leaves: the group is empty.
        try (KafkaConsumer<String, String> consumer = fx.consumer(group)) {
            consumer.subscribe(List.of(topic));
            int read = 0;
            long deadline = System.nanoTime() + Wait.DEFAULT.toNanos();
            while (read < 20) {
                assertTrue(System.nanoTime() < deadline, "timed out reading the 20 records; read " + read);
                read += consumer.poll(Duration.ofMillis(200)).count();
            }
            consumer.commitSync();
        }
        fx.awaitGroupState(group, GroupState.EMPTY);
        assertEquals(Map.of(0, new Row(10, 10, 0), 1, new Row(10, 10, 0)), describeGroup(group, "groups-describe"));

        // Without --execute it is a dry run: the new offsets are printed, none is committed.
        assertEquals(Map.of(0, 0L, 1, 0L), resetOffsets(group, "groups-reset-dry", topic, "--to-earliest"));
        assertEquals(Map.of(p0, 10L, p1, 10L), fx.committed(group));

        assertEquals(Map.of(0, 0L, 1, 0L), resetOffsets(group, "groups-reset-earliest", topic, "--to-earliest", "--execute"));
        assertEquals(Map.of(0, new Row(0, 10, 10), 1, new Row(0, 10, 10)), describeGroup(group, "groups-describe"));
        assertEquals(Map.of(p0, 0L, p1, 0L), fx.committed(group));

        assertEquals(Map.of(0, 5L, 1, 5L), resetOffsets(group, "groups-reset-offset", topic, "--to-offset", "5", "--execute"));
        assertEquals(Map.of(0, new Row(5, 10, 5), 1, new Row(5, 10, 5)), describeGroup(group, "groups-describe"));

        assertEquals(Map.of(0, 7L, 1, 7L), resetOffsets(group, "groups-reset-shift", topic, "--shift-by", "2", "--execute"));
        // One partition only (topic:partition), and a shift past the start is clamped to the log start.
        assertEquals(Map.of(1, 0L), resetOffsets(group, "groups-reset-shift-back", topic + ":1", "--shift-by", "-100",
                "--execute"));
        assertEquals(Map.of(0, new Row(7, 10, 3), 1, new Row(0, 10, 10)), describeGroup(group, "groups-describe"));
        // Past the end: clamped to the log end offset.
        assertEquals(Map.of(0, 10L, 1, 10L), resetOffsets(group, "groups-reset-shift-far", topic, "--shift-by", "100",
                "--execute"));
        assertEquals(Map.of(p0, 10L, p1, 10L), fx.committed(group));
        resetOffsets(group, "groups-reset-offset", topic, "--to-offset", "3", "--execute");

        // With a member subscribed to the topic, its offsets cannot be deleted or reset.
        try (KafkaConsumer<String, String> member = fx.consumer(group)) {
            member.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Wait.DEFAULT.toNanos();
            while (member.assignment().isEmpty()) {
                assertTrue(System.nanoTime() < deadline, "timed out waiting for the member's assignment");
                member.poll(Duration.ofMillis(100));
            }
            fx.awaitGroupState(group, GroupState.STABLE);

            KafkaTool.Result refused = tool("groups-delete-offsets-subscribed", GROUP_COMMAND, "--bootstrap-server",
                    cluster.bootstrap(), "--delete-offsets", "--group", group, "--topic", topic);
            assertEquals(0, refused.exitCode(), refused.describe());
            Map<String, String> status = deleteOffsetsStatus(refused, topic);
            assertEquals(Set.of("0", "1"), status.keySet(), refused.stdout().toString());
            for (String s : status.values()) {
                assertTrue(s.startsWith("Error: org.apache.kafka.common.errors.GroupSubscribedToTopicException"),
                        refused.stdout().toString());
            }
            assertEquals(Map.of(p0, 3L, p1, 3L), fx.committed(group), "no offset was deleted");

            KafkaTool.Result notReset = tool("groups-reset-active", GROUP_COMMAND, "--bootstrap-server",
                    cluster.bootstrap(), "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                    "--execute");
            assertEquals(0, notReset.exitCode(), notReset.describe());
            assertTrue(notReset.stdout().contains("Error: Assignments can only be reset if the group '" + group
                    + "' is inactive, but the current state is Stable."), notReset.stdout().toString());
            assertEquals(Map.of(p0, 3L, p1, 3L), fx.committed(group), "no offset was reset");
        }
        fx.awaitGroupState(group, GroupState.EMPTY);

        // Once the group is empty: deleted, one partition and then the rest of the topic.
        KafkaTool.Result one = tool("groups-delete-offsets-one", GROUP_COMMAND, "--bootstrap-server",
                cluster.bootstrap(), "--delete-offsets", "--group", group, "--topic", topic + ":0");
        assertEquals(0, one.exitCode(), one.describe());
        assertTrue(one.stdout().contains("Request succeeded for deleting offsets from group " + group + "."),
                one.stdout().toString());
        assertEquals(Map.of("0", "Successful"), deleteOffsetsStatus(one, topic));
        assertEquals(Map.of(p1, 3L), fx.committed(group));
        assertEquals(Map.of(1, new Row(3, 10, 7)), describeGroup(group, "groups-describe"));

        KafkaTool.Result rest = tool("groups-delete-offsets", GROUP_COMMAND, "--bootstrap-server",
                cluster.bootstrap(), "--delete-offsets", "--group", group, "--topic", topic);
        assertEquals(0, rest.exitCode(), rest.describe());
        assertTrue(rest.stdout().contains("Request succeeded for deleting offsets from group " + group + "."),
                rest.stdout().toString());
        assertEquals(Map.of(), fx.committed(group));
    }

    // ---------------------------------------------------------------- kafka-log-dirs

    @Test
    void logDirsCommandDescribesEveryReplicaOfTheTopic() throws Exception {
        String topic = "tools-log-dirs-" + RUN;
        fx.createTopic(topic, 2);
        fx.produce(topic, 0, 20);
        fx.produce(topic, 1, 5);
        Map<Integer, TopicPartitionInfo> partitions = new TreeMap<>();
        for (TopicPartitionInfo info : fx.describeTopic(topic).partitions()) {
            partitions.put(info.partition(), info);
        }
        // The brokers in the cluster's metadata: the tool asks each of them. (Real Kafka's
        // three; this broker lists only itself, its simulated followers are no brokers a
        // client can reach, so only the leader's replicas are described.)
        Set<Integer> brokers = cluster.admin().describeCluster().nodes().get().stream().map(Node::id)
                .collect(Collectors.toCollection(TreeSet::new));
        Map<String, Set<Integer>> holders = new TreeMap<>();
        for (TopicPartitionInfo info : partitions.values()) {
            holders.put(topic + "-" + info.partition(), info.replicas().stream().map(Node::id)
                    .filter(brokers::contains).collect(Collectors.toCollection(TreeSet::new)));
        }

        // Every such replica of each partition, on the broker that holds it, with bytes in it
        // (a follower's once it has fetched them: acks=all waited only for the ISR).
        KafkaTool.Result result = runUntil("kafka-log-dirs to show every replica of " + topic + " with size > 0",
                "log-dirs", LOG_DIRS_COMMAND,
                List.of("--describe", "--bootstrap-server", cluster.bootstrap(), "--topic-list", topic),
                r -> {
                    Map<String, Map<Integer, Long>> sizes = replicaSizes(r, topic);
                    return r.exitCode() == 0 && sizes.keySet().equals(holders.keySet())
                            && sizes.entrySet().stream().allMatch(e -> e.getValue().keySet().equals(holders.get(e.getKey()))
                            && e.getValue().values().stream().allMatch(size -> size > 0));
                });
        assertEquals("Querying brokers for log directories information", result.stdout().get(0));
        assertTrue(result.stdout().get(1).startsWith("Received log directory information from brokers "),
                result.stdout().toString());
        JsonNode json = logDirsJson(result);
        assertEquals(1, json.path("version").asInt(), json.toString());
        Set<Integer> described = new TreeSet<>();
        for (JsonNode broker : json.path("brokers")) {
            described.add(broker.path("broker").asInt());
            assertFalse(broker.path("logDirs").isEmpty(), "broker " + broker.path("broker") + " has a log dir");
            for (JsonNode dir : broker.path("logDirs")) {
                assertTrue(dir.path("error").isNull(), dir.toString());
                assertFalse(dir.path("logDir").asText().isEmpty(), dir.toString());
                for (JsonNode p : dir.path("partitions")) {
                    assertFalse(p.path("isFuture").asBoolean(), p.toString());
                    assertTrue(p.path("offsetLag").asLong() >= 0, p.toString());
                }
            }
        }
        assertEquals(brokers, described, "every broker is asked when --broker-list is not given");

        Map<String, Map<Integer, Long>> sizes = replicaSizes(result, topic);
        assertEquals(Set.of(topic + "-0", topic + "-1"), sizes.keySet(), json.toString());
        for (TopicPartitionInfo info : partitions.values()) {
            assertTrue(holders.get(topic + "-" + info.partition()).contains(info.leader().id()), info.toString());
            assertEquals(holders.get(topic + "-" + info.partition()), sizes.get(topic + "-" + info.partition()).keySet(),
                    "partition " + info.partition() + " is in the log dirs of exactly its replicas");
        }
        long leaderSize0 = sizes.get(topic + "-0").get(partitions.get(0).leader().id());
        long leaderSize1 = sizes.get(topic + "-1").get(partitions.get(1).leader().id());
        assertTrue(leaderSize0 > leaderSize1, "20 records take more bytes than 5: " + sizes);
    }

    // ---------------------------------------------------------------- helpers: tools

    private static KafkaTool.Result tool(String name, String mainClass, String... args) throws Exception {
        return KafkaTool.run(name, mainClass, List.of(args), TOOL_TIMEOUT_S);
    }

    /**
     * Runs the tool until its answer satisfies {@code done}: real Kafka's brokers learn a
     * change from the controller a moment after it is acknowledged. An API the broker does
     * not have fails at once: no retry would change that.
     */
    private static KafkaTool.Result runUntil(String what, String name, String mainClass, List<String> args,
                                             Predicate<KafkaTool.Result> done) throws Exception {
        KafkaTool.Result[] last = new KafkaTool.Result[1];
        try {
            Wait.until(what, Duration.ofSeconds(120), () -> {
                last[0] = KafkaTool.run(name, mainClass, args, TOOL_TIMEOUT_S);
                if (done.test(last[0])) {
                    return true;
                }
                String err = stderr(last[0]);
                if (err.contains("UnsupportedVersionException") || err.contains("is not supported by the cluster")) {
                    throw new AssertionError("the broker does not have the API " + what + " needs");
                }
                return false;
            });
        } catch (AssertionError e) {
            throw new AssertionError(e.getMessage() + "; last answer: " + (last[0] == null ? "none"
                    : last[0].stdout() + ", " + last[0].describe()), e);
        }
        return last[0];
    }

    private static String stderr(KafkaTool.Result result) throws Exception {
        return Files.readString(result.stderrFile(), StandardCharsets.UTF_8);
    }

    /** kafka-topics --describe: the topic's line, as Key: value fields. */
    private static Map<String, String> topicLine(KafkaTool.Result result, String topic) {
        for (String line : result.stdout()) {
            if (line.startsWith("Topic: " + topic + "\t")) {
                return fields(line);
            }
        }
        return Map.of();
    }

    /** kafka-topics --describe: one tab-indented line per partition, by partition. */
    private static Map<Integer, Map<String, String>> partitionLines(KafkaTool.Result result, String topic) {
        Map<Integer, Map<String, String>> partitions = new TreeMap<>();
        for (String line : result.stdout()) {
            if (line.startsWith("\tTopic: " + topic + "\t")) {
                Map<String, String> fields = fields(line);
                partitions.put(Integer.parseInt(fields.get("Partition")), fields);
            }
        }
        return partitions;
    }

    /** "Topic: t\tPartition: 0\tLeader: 1\tElr: " → {Topic=t, Partition=0, Leader=1, Elr=}. */
    private static Map<String, String> fields(String line) {
        Map<String, String> fields = new LinkedHashMap<>();
        for (String field : line.trim().split("\t")) {
            int colon = field.indexOf(':');
            if (colon > 0) {
                fields.put(field.substring(0, colon).trim(), field.substring(colon + 1).trim());
            }
        }
        return fields;
    }

    /** One config as kafka-configs --describe prints it. */
    record ConfigLine(String name, String value, boolean sensitive, List<String> synonyms) {
    }

    private static final Pattern CONFIG_LINE = Pattern.compile(
            "^  ([^=]+)=(.*) sensitive=(true|false) synonyms=\\{(.*)}$");

    /**
     * kafka-configs --describe: the lines under {@code header}, "  name=value sensitive=false
     * synonyms={SOURCE:name=value, ...}", by name; empty when the header is missing.
     */
    private static Map<String, ConfigLine> configs(KafkaTool.Result result, String header) {
        Map<String, ConfigLine> configs = new TreeMap<>();
        int start = result.stdout().indexOf(header);
        if (start < 0) {
            return configs;
        }
        for (String line : result.stdout().subList(start + 1, result.stdout().size())) {
            Matcher m = CONFIG_LINE.matcher(line);
            if (!m.matches()) {
                break;
            }
            List<String> synonyms = m.group(4).isEmpty() ? List.of() : List.of(m.group(4).split(", "));
            configs.put(m.group(1), new ConfigLine(m.group(1), m.group(2), Boolean.parseBoolean(m.group(3)), synonyms));
        }
        return configs;
    }

    private static String value(Map<String, ConfigLine> configs, String name) {
        ConfigLine line = configs.get(name);
        return line == null ? null : line.value();
    }

    /** The value is the broker's static config (config/broker.toml, server.properties). */
    private static void assertStatic(Map<String, ConfigLine> configs, String name, String value) {
        ConfigLine line = configs.get(name);
        assertNotNull(line, name + " is described");
        assertEquals(value, line.value(), line.toString());
        assertFalse(line.synonyms().isEmpty(), line.toString());
        assertTrue(brokerLevel(name, value).contains(line.synonyms().get(0)), line.toString());
    }

    /**
     * The broker's own setting as a synonym: STATIC_BROKER_CONFIG where its file sets it
     * (Kafka reports whatever server.properties gives so), or, on this broker, where it
     * differs from the built-in default; DEFAULT_CONFIG where it equals this broker's
     * built-in default (config/broker.toml lists every default).
     */
    private static List<String> brokerLevel(String name, String value) {
        return List.of("STATIC_BROKER_CONFIG:" + name + "=" + value, "DEFAULT_CONFIG:" + name + "=" + value);
    }

    private static String last(List<String> list) {
        return list.isEmpty() ? null : list.get(list.size() - 1);
    }

    /** Writes kafka-delete-records' offsets file ({"partitions": [...], "version": 1}) and runs it. */
    private static KafkaTool.Result deleteRecords(String name, String topic, Map<Integer, Long> offsets)
            throws Exception {
        Map<String, Object> file = new LinkedHashMap<>();
        List<Map<String, Object>> partitions = new ArrayList<>();
        for (Map.Entry<Integer, Long> e : new TreeMap<>(offsets).entrySet()) {
            partitions.add(Map.of("topic", topic, "partition", e.getKey(), "offset", e.getValue()));
        }
        file.put("partitions", partitions);
        file.put("version", 1);
        Path dir = Path.of("target", "tools").toAbsolutePath();
        Files.createDirectories(dir);
        Path json = dir.resolve(name + ".json");
        Files.writeString(json, JSON.writeValueAsString(file), StandardCharsets.UTF_8);
        return tool(name, DELETE_RECORDS_COMMAND, "--bootstrap-server", cluster.bootstrap(),
                "--offset-json-file", json.toString());
    }

    /** kafka-delete-records: "partition: t-0\tlow_watermark: 4" (or "\terror: ...") by partition. */
    private static Map<String, String> deleteRecordsLines(KafkaTool.Result result) {
        Map<String, String> lines = new TreeMap<>();
        for (String line : result.stdout()) {
            if (line.startsWith("partition: ")) {
                int tab = line.indexOf('\t');
                lines.put(line.substring("partition: ".length(), tab), line.substring(tab + 1));
            }
        }
        return lines;
    }

    /** A row of kafka-consumer-groups --describe. */
    record Row(long currentOffset, long logEndOffset, long lag) {
    }

    /** kafka-consumer-groups --describe --group G: its rows by partition. */
    private static Map<Integer, Row> describeGroup(String group, String name) throws Exception {
        KafkaTool.Result result = tool(name, GROUP_COMMAND, "--bootstrap-server", cluster.bootstrap(),
                "--describe", "--group", group);
        assertEquals(0, result.exitCode(), result.describe());
        Map<Integer, Row> rows = new TreeMap<>();
        for (Map<String, String> row : table(result, "GROUP")) {
            rows.put(Integer.parseInt(row.get("PARTITION")), new Row(Long.parseLong(row.get("CURRENT-OFFSET")),
                    Long.parseLong(row.get("LOG-END-OFFSET")), Long.parseLong(row.get("LAG"))));
        }
        return rows;
    }

    /** kafka-consumer-groups --reset-offsets: the NEW-OFFSET it prints, by partition. */
    private static Map<Integer, Long> resetOffsets(String group, String name, String topic, String... how)
            throws Exception {
        List<String> args = new ArrayList<>(List.of("--bootstrap-server", cluster.bootstrap(), "--reset-offsets",
                "--group", group, "--topic", topic));
        args.addAll(List.of(how));
        KafkaTool.Result result = KafkaTool.run(name, GROUP_COMMAND, args, TOOL_TIMEOUT_S);
        assertEquals(0, result.exitCode(), result.describe());
        Map<Integer, Long> offsets = new TreeMap<>();
        for (Map<String, String> row : table(result, "GROUP")) {
            offsets.put(Integer.parseInt(row.get("PARTITION")), Long.parseLong(row.get("NEW-OFFSET")));
        }
        return offsets;
    }

    /** kafka-consumer-groups --delete-offsets: each partition's STATUS, by partition. */
    private static Map<String, String> deleteOffsetsStatus(KafkaTool.Result result, String topic) {
        Map<String, String> status = new TreeMap<>();
        for (String line : result.stdout()) {
            String[] cols = line.trim().split("\\s+", 3);
            if (cols.length == 3 && cols[0].equals(topic)) {
                status.put(cols[1], cols[2].trim());
            }
        }
        return status;
    }

    /** The whitespace-separated table whose header line starts with {@code first}. */
    private static List<Map<String, String>> table(KafkaTool.Result result, String first) {
        List<Map<String, String>> rows = new ArrayList<>();
        String[] header = null;
        for (String line : result.stdout()) {
            if (line.isBlank()) {
                continue;
            }
            String[] cols = line.trim().split("\\s+");
            if (header == null) {
                if (cols[0].equals(first)) {
                    header = cols;
                }
                continue;
            }
            if (cols.length != header.length) {
                break;
            }
            Map<String, String> row = new HashMap<>();
            for (int i = 0; i < cols.length; i++) {
                row.put(header[i], cols[i]);
            }
            rows.add(row);
        }
        return rows;
    }

    /** kafka-log-dirs --describe: the JSON line. */
    private static JsonNode logDirsJson(KafkaTool.Result result) {
        for (String line : result.stdout()) {
            if (line.startsWith("{")) {
                try {
                    return JSON.readTree(line);
                } catch (Exception e) {
                    throw new AssertionError("kafka-log-dirs printed bad JSON: " + line, e);
                }
            }
        }
        return JSON.createObjectNode();
    }

    /** Each of the topic's partitions ("t-0"): its size on every broker that lists it. */
    private static Map<String, Map<Integer, Long>> replicaSizes(KafkaTool.Result result, String topic) {
        Map<String, Map<Integer, Long>> sizes = new TreeMap<>();
        for (JsonNode broker : logDirsJson(result).path("brokers")) {
            for (JsonNode dir : broker.path("logDirs")) {
                for (JsonNode p : dir.path("partitions")) {
                    String name = p.path("partition").asText();
                    if (name.startsWith(topic + "-")) {
                        sizes.computeIfAbsent(name, n -> new TreeMap<>())
                                .put(broker.path("broker").asInt(), p.path("size").asLong());
                    }
                }
            }
        }
        return sizes;
    }

    // ---------------------------------------------------------------- helpers: clients

    private static int partitionCount(String topic) throws Exception {
        TopicDescription d = fx.describeTopicOrNull(topic);
        return d == null ? 0 : d.partitions().size();
    }
}
