package dev.purgatory.it;

import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/*
 * A consumer group of two KafkaConsumer members (kafka-clients 4.4, classic protocol) on a
 * four-partition topic: the coordinator splits the partitions between them, together they
 * read every record exactly once, they commit, and after both have closed a new member of
 * the same group resumes from the committed offsets, reading only what came after.
 */
class ConsumerGroupTest {
    private static final String TOPIC = "group-orders";
    private static final String GROUP = "group-orders-app";
    private static final int PARTITIONS = 4;
    private static final int PER_PARTITION = 50;

    @RegisterExtension
    static final BrokerExtension cluster = new BrokerExtension(new NewTopic(TOPIC, PARTITIONS, (short) 3));

    /** A produced record as a consumer should see it. */
    record Seen(int partition, long offset, String key, String value) {
        static Seen of(ConsumerRecord<String, String> r) {
            return new Seen(r.partition(), r.offset(), r.key(), r.value());
        }
    }

    @Test
    void twoMembersSplitThePartitionsCommitAndANewMemberResumes() throws Exception {
        Set<TopicPartition> all = IntStream.range(0, PARTITIONS).mapToObj(p -> new TopicPartition(TOPIC, p))
                .collect(Collectors.toSet());
        Map<TopicPartition, Long> committedOffsets = new HashMap<>();

        try (KafkaConsumer<String, String> first = Clients.consumer(cluster.broker(), GROUP, "member-a");
             KafkaConsumer<String, String> second = Clients.consumer(cluster.broker(), GROUP, "member-b")) {
            first.subscribe(List.of(TOPIC));
            second.subscribe(List.of(TOPIC));
            List<Seen> byFirst = new ArrayList<>();
            List<Seen> bySecond = new ArrayList<>();

            // One thread polls both members in turn (a KafkaConsumer is not thread-safe) until
            // the rebalance that admits the second member has given each its share.
            Wait.until("both members to hold disjoint halves of the " + PARTITIONS + " partitions", () -> {
                first.poll(Duration.ofMillis(100)).forEach(r -> byFirst.add(Seen.of(r)));
                second.poll(Duration.ofMillis(100)).forEach(r -> bySecond.add(Seen.of(r)));
                Set<TopicPartition> a = first.assignment();
                Set<TopicPartition> b = second.assignment();
                Set<TopicPartition> union = new HashSet<>(a);
                union.addAll(b);
                return a.size() == PARTITIONS / 2 && b.size() == PARTITIONS / 2 && union.equals(all);
            });
            assertTrue(byFirst.isEmpty() && bySecond.isEmpty(), "nothing was produced yet");
            Set<TopicPartition> firstPartitions = Set.copyOf(first.assignment());
            Set<TopicPartition> secondPartitions = Set.copyOf(second.assignment());

            List<Seen> produced = produce(0, PER_PARTITION);

            Wait.until("the two members to read the " + produced.size() + " records", () -> {
                first.poll(Duration.ofMillis(100)).forEach(r -> byFirst.add(Seen.of(r)));
                second.poll(Duration.ofMillis(100)).forEach(r -> bySecond.add(Seen.of(r)));
                return byFirst.size() + bySecond.size() >= produced.size();
            });
            // The assignment did not change while they read.
            assertEquals(firstPartitions, first.assignment());
            assertEquals(secondPartitions, second.assignment());

            // Each record exactly once, from the member that owns its partition, in offset order.
            Lists.assertSameList(expectedFor(produced, firstPartitions), sortedByPartition(byFirst), "what member-a read");
            Lists.assertSameList(expectedFor(produced, secondPartitions), sortedByPartition(bySecond), "what member-b read");

            // Each commits its position in each of its partitions, with a note.
            for (KafkaConsumer<String, String> member : List.of(first, second)) {
                Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                for (TopicPartition tp : member.assignment()) {
                    positions.put(tp, new OffsetAndMetadata(member.position(tp), checkpoint(tp)));
                }
                member.commitSync(positions);
            }
            for (TopicPartition tp : all) {
                KafkaConsumer<String, String> owner = firstPartitions.contains(tp) ? first : second;
                OffsetAndMetadata committed = owner.committed(Set.of(tp)).get(tp);
                assertNotNull(committed, "no committed offset for " + tp);
                assertEquals(PER_PARTITION, committed.offset(), "committed offset of " + tp);
                assertEquals(checkpoint(tp), committed.metadata(), "commit metadata of " + tp);
                committedOffsets.put(tp, committed.offset());
            }
        }

        // Both closed (they left the group). The committed offsets stay with the group.
        Map<TopicPartition, OffsetAndMetadata> stored = cluster.admin().listConsumerGroupOffsets(GROUP)
                .partitionsToOffsetAndMetadata().get();
        assertEquals(all, stored.keySet());
        stored.forEach((tp, offset) -> assertEquals(committedOffsets.get(tp), offset.offset(), "stored " + tp));

        List<Seen> later = produce(PER_PARTITION, 10);

        try (KafkaConsumer<String, String> restarted = Clients.consumer(cluster.broker(), GROUP, "member-c")) {
            restarted.subscribe(List.of(TOPIC));
            List<Seen> read = new ArrayList<>();
            Wait.until("the restarted member to read the " + later.size() + " new records", () -> {
                restarted.poll(Duration.ofMillis(100)).forEach(r -> read.add(Seen.of(r)));
                return read.size() >= later.size();
            });
            assertEquals(all, restarted.assignment(), "the only member gets every partition");
            Map<TopicPartition, OffsetAndMetadata> committed = restarted.committed(all);
            for (TopicPartition tp : all) {
                assertNotNull(committed.get(tp), "the group has no committed offset for " + tp);
                assertEquals(PER_PARTITION, committed.get(tp).offset(), "committed offset " + tp + " before its commit");
                assertEquals(checkpoint(tp), committed.get(tp).metadata(), "commit metadata of " + tp);
            }
            Lists.assertSameList(expectedFor(later, all), sortedByPartition(read),
                    "the restarted member reads only the records produced after the commit");

            restarted.commitSync();
            Map<TopicPartition, OffsetAndMetadata> after = restarted.committed(all);
            for (TopicPartition tp : all) {
                assertEquals(PER_PARTITION + 10, after.get(tp).offset(), "committed offset of " + tp);
            }
            assertFalse(read.stream().anyMatch(s -> s.offset() < PER_PARTITION), "re-read a committed record");
        }
    }

    private static String checkpoint(TopicPartition tp) {
        return "checkpoint of " + tp;
    }

    /**
     * Produces {@code count} records to every partition, numbered from {@code from}; returns
     * them with the offsets the broker acknowledged (each must be the next in its partition).
     */
    private static List<Seen> produce(int from, int count) throws Exception {
        List<ProducerRecord<String, String>> records = new ArrayList<>();
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<String, String> producer = Clients.producer(cluster.broker(), Map.of())) {
            for (int i = from; i < from + count; i++) {
                for (int p = 0; p < PARTITIONS; p++) {
                    ProducerRecord<String, String> record = new ProducerRecord<>(TOPIC, p, "p" + p + "-" + i,
                            "order " + i + " of partition " + p);
                    records.add(record);
                    acks.add(producer.send(record));
                }
            }
        }
        List<Seen> produced = new ArrayList<>();
        for (int i = 0; i < records.size(); i++) {
            RecordMetadata metadata = acks.get(i).get();
            ProducerRecord<String, String> record = records.get(i);
            assertEquals(from + i / PARTITIONS, metadata.offset(), "offset of " + record.key());
            produced.add(new Seen(metadata.partition(), metadata.offset(), record.key(), record.value()));
        }
        return produced;
    }

    /** The records of these partitions, partition by partition, each in offset order. */
    private static List<Seen> expectedFor(List<Seen> produced, Set<TopicPartition> partitions) {
        Set<Integer> ids = partitions.stream().map(TopicPartition::partition).collect(Collectors.toSet());
        return sortedByPartition(produced.stream().filter(s -> ids.contains(s.partition())).toList());
    }

    /**
     * Orders by partition, keeping the order within each partition as it was (a consumer's
     * order across partitions is free, within one it must be the offset order).
     */
    private static List<Seen> sortedByPartition(List<Seen> seen) {
        List<Seen> sorted = new ArrayList<>(seen);
        sorted.sort((x, y) -> Integer.compare(x.partition(), y.partition())); // stable
        return sorted;
    }
}
