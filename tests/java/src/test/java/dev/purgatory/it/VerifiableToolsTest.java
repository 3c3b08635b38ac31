package dev.purgatory.it;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/*
 * Kafka's own system-test tools (kafka-tools 4.4), each its own JVM as in Kafka's system
 * tests: VerifiableProducer with acks=-1 writes, VerifiableConsumer reads in a group, and
 * their JSON events must show what Kafka's system tests check — every acknowledged record
 * consumed exactly once, in offset order per partition, with successful offset commits.
 * A second round runs two VerifiableConsumers in the same group: they split the partitions
 * and resume from the offsets the first round committed.
 */
class VerifiableToolsTest {
    private static final String TOPIC = "verifiable";
    private static final String GROUP = "verifiable-group";
    private static final int PARTITIONS = 3;
    private static final int FIRST_ROUND = 3000;
    private static final int SECOND_ROUND = 600;

    @RegisterExtension
    static final BrokerExtension cluster = new BrokerExtension(new NewTopic(TOPIC, PARTITIONS, (short) 3));

    /** One record as the tools print it. */
    record Rec(int partition, long offset, String key, String value) {
        static Rec of(JsonNode event) {
            return new Rec(event.path("partition").asInt(), event.path("offset").asLong(),
                    event.path("key").isNull() ? null : event.path("key").asText(), event.path("value").asText());
        }

        /** VerifiableProducer's values count up from 0, after an optional "prefix.". */
        long sequence() {
            return Long.parseLong(value.substring(value.lastIndexOf('.') + 1));
        }
    }

    @Test
    void everyAcknowledgedRecordIsConsumedInOrderAndTwoConsumersResume() throws Exception {
        // Round 1: one producer, then one consumer of the group that stops after FIRST_ROUND.
        List<Rec> produced = runProducer("verifiable-producer-1", FIRST_ROUND, null);
        Map<Integer, Long> end = checkProduced(produced, Map.of());

        KafkaTool.Result consumed = KafkaTool.run("verifiable-consumer-1", "org.apache.kafka.tools.VerifiableConsumer",
                consumerArgs(FIRST_ROUND), 180);
        assertEquals(0, consumed.exitCode(), consumed.describe());
        List<JsonNode> events = consumed.events();
        assertEquals(1, events.stream().filter(e -> e.path("name").asText().equals("shutdown_complete")).count(),
                consumed.describe());
        assertEquals(allPartitions(), assigned(consumed.events("partitions_assigned").get(0)),
                "the group's only member gets every partition");
        checkConsumed(events, produced, Map.of());
        checkCommitted(events, end);
        assertEquals(end, groupOffsets(), "the group's committed offsets are the log end of each partition");

        // Round 2: two consumers of the same group split the partitions, then more records
        // are produced; they read only those, each from its own partitions.
        KafkaTool.Running a = KafkaTool.start("verifiable-consumer-2a", "org.apache.kafka.tools.VerifiableConsumer",
                consumerArgs(-1));
        KafkaTool.Running b = KafkaTool.start("verifiable-consumer-2b", "org.apache.kafka.tools.VerifiableConsumer",
                consumerArgs(-1));
        try {
            Wait.until("the two consumers to hold disjoint shares of the " + PARTITIONS + " partitions", () -> {
                Set<TopicPartition> ofA = currentAssignment(a.eventsSoFar());
                Set<TopicPartition> ofB = currentAssignment(b.eventsSoFar());
                Set<TopicPartition> union = new HashSet<>(ofA);
                union.addAll(ofB);
                return !ofA.isEmpty() && !ofB.isEmpty() && ofA.size() + ofB.size() == PARTITIONS
                        && union.equals(allPartitions());
            });
            Set<TopicPartition> ofA = currentAssignment(a.eventsSoFar());
            Set<TopicPartition> ofB = currentAssignment(b.eventsSoFar());

            List<Rec> more = runProducer("verifiable-producer-2", SECOND_ROUND, "2");
            Map<Integer, Long> newEnd = checkProduced(more, end);

            Wait.until("both consumers to commit the new log end offsets " + newEnd, () -> {
                Map<Integer, Long> committed = new HashMap<>(lastCommitted(a.eventsSoFar()));
                committed.putAll(lastCommitted(b.eventsSoFar()));
                return committed.equals(newEnd);
            });
            // No rebalance while they read: each still holds what it was given.
            assertEquals(ofA, currentAssignment(a.eventsSoFar()), "consumer a's partitions changed");
            assertEquals(ofB, currentAssignment(b.eventsSoFar()), "consumer b's partitions changed");

            // Stop both at once (SIGTERM: their shutdown hooks close the consumers).
            a.terminate();
            b.terminate();
            KafkaTool.Result resultA = a.await(60);
            KafkaTool.Result resultB = b.await(60);
            List<JsonNode> eventsA = resultA.events();
            List<JsonNode> eventsB = resultB.events();
            assertEquals(1, resultA.events("shutdown_complete").size(), resultA.describe());
            assertEquals(1, resultB.events("shutdown_complete").size(), resultB.describe());

            checkConsumed(eventsA, only(more, ofA), end);
            checkConsumed(eventsB, only(more, ofB), end);
            checkCommitted(eventsA, restrict(newEnd, ofA));
            checkCommitted(eventsB, restrict(newEnd, ofB));
            assertEquals(newEnd, groupOffsets());
        } finally {
            a.kill();
            b.kill();
        }
    }

    private static List<String> consumerArgs(int maxMessages) {
        return List.of("--bootstrap-server", cluster.broker().bootstrap(), "--topic", TOPIC, "--group-id", GROUP,
                "--max-messages", Integer.toString(maxMessages), "--verbose", "--reset-policy", "earliest",
                "--session-timeout", "10000");
    }

    /** Runs VerifiableProducer with acks=-1 and returns its acknowledged records, checking it sent all. */
    private static List<Rec> runProducer(String name, int count, String valuePrefix) throws Exception {
        List<String> args = new ArrayList<>(List.of("--bootstrap-server", cluster.broker().bootstrap(),
                "--topic", TOPIC, "--max-messages", Integer.toString(count), "--acks", "-1", "--repeating-keys", "50"));
        if (valuePrefix != null) {
            args.addAll(List.of("--value-prefix", valuePrefix));
        }
        KafkaTool.Result result = KafkaTool.run(name, "org.apache.kafka.tools.VerifiableProducer", args, 180);
        assertEquals(0, result.exitCode(), result.describe());
        assertEquals(List.of(), result.events("producer_send_error"), "send errors; " + result.describe());
        List<JsonNode> toolData = result.events("tool_data");
        assertEquals(1, toolData.size(), result.describe());
        assertEquals(count, toolData.get(0).path("sent").asLong());
        assertEquals(count, toolData.get(0).path("acked").asLong());
        List<Rec> acked = result.events("producer_send_success").stream().map(Rec::of).toList();
        assertEquals(count, acked.size(), "producer_send_success events");
        return acked;
    }

    /**
     * What the producer's acknowledgements must show: each partition's offsets continue from
     * where it ended ({@code start}) without gap or repeat, in the order the records were sent,
     * and one key always goes to one partition. Returns each partition's new log end.
     */
    private static Map<Integer, Long> checkProduced(List<Rec> acked, Map<Integer, Long> start) throws Exception {
        Map<Integer, List<Rec>> byPartition = groupByPartition(acked);
        Map<Integer, Long> end = new TreeMap<>();
        Map<String, Integer> partitionOfKey = new HashMap<>();
        for (int p = 0; p < PARTITIONS; p++) {
            List<Rec> records = new ArrayList<>(byPartition.getOrDefault(p, List.of()));
            records.sort(Comparator.comparingLong(Rec::offset));
            long next = start.getOrDefault(p, 0L);
            long lastSequence = -1;
            for (Rec r : records) {
                assertEquals(next, r.offset(), "partition " + p + ": offsets must follow each other");
                assertTrue(r.sequence() > lastSequence, "partition " + p + ": offset " + r.offset()
                        + " holds value " + r.value() + ", sent before the previous offset's");
                Integer other = partitionOfKey.putIfAbsent(r.key(), p);
                assertTrue(other == null || other == p, "key " + r.key() + " went to partitions " + other + " and " + p);
                lastSequence = r.sequence();
                next++;
            }
            end.put(p, next);
            TopicPartition tp = new TopicPartition(TOPIC, p);
            assertEquals(next, cluster.latestOffset(tp), "high watermark of " + tp);
        }
        assertEquals(acked.size(), acked.stream().map(Rec::value).distinct().count(), "values are unique");
        assertEquals(PARTITIONS, byPartition.size(), "50 keys spread over every partition: " + byPartition.keySet());
        return end;
    }

    /**
     * What a consumer's events must show: its record_data events are exactly the expected
     * records, each once, in offset order per partition starting at {@code start}; its
     * records_consumed summaries agree with them and cover contiguous offset ranges.
     */
    private static void checkConsumed(List<JsonNode> events, List<Rec> expected, Map<Integer, Long> start) {
        List<Rec> records = events.stream().filter(e -> e.path("name").asText().equals("record_data"))
                .map(Rec::of).toList();
        Map<Integer, List<Rec>> got = groupByPartition(records);
        Map<Integer, List<Rec>> want = groupByPartition(expected);
        for (List<Rec> list : want.values()) {
            list.sort(Comparator.comparingLong(Rec::offset));
        }
        assertEquals(want.keySet(), got.keySet(), "partitions consumed");
        for (Map.Entry<Integer, List<Rec>> e : want.entrySet()) {
            // Consumption order per partition must be the offset order: compare unsorted.
            Lists.assertSameList(e.getValue(), got.get(e.getKey()), "records of partition " + e.getKey()
                    + " in the order consumed");
        }

        Map<Integer, Long> nextOffset = new HashMap<>(start);
        long total = 0;
        for (JsonNode event : events) {
            if (!event.path("name").asText().equals("records_consumed")) {
                continue;
            }
            long summed = 0;
            for (JsonNode s : event.path("partitions")) {
                int p = s.path("partition").asInt();
                long min = s.path("minOffset").asLong();
                long max = s.path("maxOffset").asLong();
                long count = s.path("count").asLong();
                assertEquals(nextOffset.getOrDefault(p, 0L), min, "partition " + p + ": a consumed range starts"
                        + " where the previous ended");
                assertEquals(max - min + 1, count, "partition " + p + ": range " + min + ".." + max + " has no gap");
                nextOffset.put(p, max + 1);
                summed += count;
            }
            assertEquals(event.path("count").asLong(), summed, "records_consumed count vs its partitions: " + event);
            total += summed;
        }
        assertEquals(expected.size(), total, "records_consumed counts");
    }

    /** Every commit succeeded, and the last commit of each partition is its log end. */
    private static void checkCommitted(List<JsonNode> events, Map<Integer, Long> end) {
        List<JsonNode> commits = events.stream().filter(e -> e.path("name").asText().equals("offsets_committed"))
                .toList();
        assertFalse(commits.isEmpty(), "the consumer committed");
        for (JsonNode commit : commits) {
            assertTrue(commit.path("success").asBoolean(), "commit failed: " + commit);
        }
        assertEquals(end, lastCommitted(events));
    }

    private static Map<Integer, Long> lastCommitted(List<JsonNode> events) {
        Map<Integer, Long> last = new TreeMap<>();
        for (JsonNode event : events) {
            if (event.path("name").asText().equals("offsets_committed") && event.path("success").asBoolean()) {
                for (JsonNode o : event.path("offsets")) {
                    last.put(o.path("partition").asInt(), o.path("offset").asLong());
                }
            }
        }
        return last;
    }

    /** The partitions the last rebalance event left the consumer (empty after a revoke). */
    private static Set<TopicPartition> currentAssignment(List<JsonNode> events) {
        Set<TopicPartition> current = new HashSet<>();
        for (JsonNode event : events) {
            switch (event.path("name").asText()) {
                case "partitions_assigned" -> current.addAll(assigned(event));
                case "partitions_revoked" -> current.removeAll(assigned(event));
                default -> {
                }
            }
        }
        return current;
    }

    private static Set<TopicPartition> assigned(JsonNode event) {
        Set<TopicPartition> partitions = new HashSet<>();
        for (JsonNode p : event.path("partitions")) {
            partitions.add(new TopicPartition(p.path("topic").asText(), p.path("partition").asInt()));
        }
        return partitions;
    }

    private static Map<Integer, Long> groupOffsets() throws Exception {
        Map<Integer, Long> offsets = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : cluster.admin().listConsumerGroupOffsets(GROUP)
                .partitionsToOffsetAndMetadata().get().entrySet()) {
            offsets.put(e.getKey().partition(), e.getValue().offset());
        }
        return offsets;
    }

    private static Set<TopicPartition> allPartitions() {
        Set<TopicPartition> all = new HashSet<>();
        for (int p = 0; p < PARTITIONS; p++) {
            all.add(new TopicPartition(TOPIC, p));
        }
        return all;
    }

    private static List<Rec> only(List<Rec> records, Set<TopicPartition> partitions) {
        Set<Integer> ids = partitions.stream().map(TopicPartition::partition).collect(Collectors.toSet());
        return records.stream().filter(r -> ids.contains(r.partition())).toList();
    }

    private static Map<Integer, Long> restrict(Map<Integer, Long> offsets, Set<TopicPartition> partitions) {
        Map<Integer, Long> restricted = new TreeMap<>();
        for (TopicPartition tp : partitions) {
            restricted.put(tp.partition(), offsets.get(tp.partition()));
        }
        return restricted;
    }

    private static Map<Integer, List<Rec>> groupByPartition(List<Rec> records) {
        Map<Integer, List<Rec>> byPartition = new TreeMap<>();
        for (Rec r : records) {
            byPartition.computeIfAbsent(r.partition(), p -> new ArrayList<>()).add(r);
        }
        return byPartition;
    }
}
