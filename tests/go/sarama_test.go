// IBM Sarama (github.com/IBM/sarama) against the broker.
//
// TestSaramaSyncProducerWaitForAll shows what RequiredAcks = WaitForAll means here: each
// SendMessage is answered with the next offset, 0..N-1 in order; with both followers
// paused a send stays parked in the produce purgatory (seen in /api/state) and does not
// return, and once the followers resume and move the high watermark past it, it returns
// with the next offset. Everything sent reads back intact.
//
// TestSaramaConsumerGroupCommitsAndResumes shows Sarama's consumer group on the classic
// protocol: two members get disjoint claims that cover the topic, consume every record
// exactly once, MarkMessage and Commit, ClusterAdmin.ListConsumerGroupOffsets shows the
// committed offsets, and a new session of the same group resumes after them, reading only
// the records produced since.
package gotests

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// saramaVersion is the Kafka version Sarama speaks. Sarama also narrows each request to
// the versions the broker advertises in ApiVersions.
var saramaVersion = sarama.V3_6_0_0

// logSink carries sarama.Logger (a package global) into the current test's log.
type logSink struct {
	mu  sync.Mutex
	dst *testLog
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	dst := s.dst
	s.mu.Unlock()
	if dst != nil {
		return dst.Write(p)
	}
	return len(p), nil
}

var saramaLogSink = &logSink{}

func init() {
	sarama.Logger = log.New(saramaLogSink, "", log.Lmicroseconds)
}

// saramaLogsTo sends Sarama's log to this test's log until it ends.
func saramaLogsTo(t *testing.T) {
	l := newTestLog(t, "sarama")
	saramaLogSink.mu.Lock()
	saramaLogSink.dst = l
	saramaLogSink.mu.Unlock()
	t.Cleanup(func() {
		saramaLogSink.mu.Lock()
		saramaLogSink.dst = nil
		saramaLogSink.mu.Unlock()
	})
}

func saramaConfig(clientID string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = saramaVersion
	cfg.ClientID = clientID
	return cfg
}

func saramaAdmin(t *testing.T, b *Broker) sarama.ClusterAdmin {
	t.Helper()
	adm, err := sarama.NewClusterAdmin([]string{b.Bootstrap}, saramaConfig("go-sarama-admin"))
	if err != nil {
		t.Fatalf("sarama.NewClusterAdmin: %v", err)
	}
	t.Cleanup(func() { adm.Close() })
	return adm
}

func saramaCreateTopic(t *testing.T, adm sarama.ClusterAdmin, topic string, partitions int32) {
	t.Helper()
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 3}, false); err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
	described, err := adm.DescribeTopics([]string{topic})
	if err != nil || len(described) != 1 || !errors.Is(described[0].Err, sarama.ErrNoError) || len(described[0].Partitions) != int(partitions) {
		t.Fatalf("DescribeTopics %s after creating it with %d partitions: %+v, %v", topic, partitions, described, err)
	}
}

func newSyncProducer(t *testing.T, b *Broker, clientID string, manualPartitions bool) sarama.SyncProducer {
	t.Helper()
	cfg := saramaConfig(clientID)
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	// The produce request's timeout: long enough for the paused-followers step below.
	cfg.Producer.Timeout = 30 * time.Second
	if manualPartitions {
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
	}
	p, err := sarama.NewSyncProducer([]string{b.Bootstrap}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestSaramaSyncProducerWaitForAll(t *testing.T) {
	saramaLogsTo(t)
	b := startBroker(t)
	const topic = "sarama-acks-all"
	const n = 200
	const clientID = "go-sarama-sync-producer"
	saramaCreateTopic(t, saramaAdmin(t, b), topic, 1)
	producer := newSyncProducer(t, b, clientID, false)

	values := map[int64]string{}
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("sarama value %d", i)
		partition, offset, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value: sarama.StringEncoder(v),
		})
		if err != nil {
			t.Fatalf("SendMessage %d: %v", i, err)
		}
		if partition != 0 || offset != int64(i) {
			t.Fatalf("SendMessage %d answered partition %d offset %d; want partition 0 offset %d", i, partition, offset, i)
		}
		values[offset] = v
	}

	// Pause both followers: the next acks=all send is appended on the leader but cannot
	// be acknowledged until the high watermark passes it.
	b.Follower(t, 2, "pause")
	b.Follower(t, 3, "pause")
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			b.Follower(t, 2, "resume")
			b.Follower(t, 3, "resume")
		}
	})
	type sendResult struct {
		partition int32
		offset    int64
		err       error
	}
	done := make(chan sendResult, 1)
	const parkedValue = "sent while both followers were paused"
	go func() {
		p, o, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder("parked"),
			Value: sarama.StringEncoder(parkedValue),
		})
		done <- sendResult{p, o, err}
	}()

	key := topic + "-0"
	waitFor(t, 30*time.Second, "the send to be parked in the produce purgatory as a DelayedProduce on "+key, func() bool {
		for _, op := range b.State(t).Purgatories["produce"].Pending {
			if strings.Contains(op.Description, clientID) && len(op.Keys) == 1 && op.Keys[0] == key {
				return true
			}
		}
		return false
	})
	select {
	case r := <-done:
		t.Fatalf("SendMessage returned (partition %d offset %d, err %v) while its produce is still parked waiting for the paused followers", r.partition, r.offset, r.err)
	default:
	}
	for _, p := range b.State(t).Partitions {
		if p.Topic == topic && (p.HighWatermark != n || p.LogEndOffset != n+1) {
			t.Fatalf("%s while the send is parked: HW %d, LEO %d; want HW %d (the followers have not fetched it), LEO %d", key, p.HighWatermark, p.LogEndOffset, n, n+1)
		}
	}

	b.Follower(t, 2, "resume")
	b.Follower(t, 3, "resume")
	resumed = true
	var r sendResult
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("SendMessage did not return within 60 s of resuming both followers")
	}
	if r.err != nil {
		t.Fatalf("the send parked while the followers were paused failed after they resumed: %v", r.err)
	}
	if r.partition != 0 || r.offset != n {
		t.Fatalf("the parked send completed at partition %d offset %d; want partition 0 offset %d", r.partition, r.offset, n)
	}
	values[r.offset] = parkedValue
	for _, p := range b.State(t).Partitions {
		if p.Topic == topic && p.HighWatermark != n+1 {
			t.Fatalf("%s after the parked send completed: HW %d; want %d", key, p.HighWatermark, n+1)
		}
	}

	// Everything reads back, in order, at the offsets the sends were given.
	consumer, err := sarama.NewConsumer([]string{b.Bootstrap}, saramaConfig("go-sarama-consumer"))
	if err != nil {
		t.Fatalf("sarama.NewConsumer: %v", err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("ConsumePartition: %v", err)
	}
	defer pc.Close()
	for want := int64(0); want <= n; want++ {
		select {
		case m := <-pc.Messages():
			if m.Offset != want || string(m.Value) != values[want] {
				t.Fatalf("read offset %d value %q; want offset %d value %q", m.Offset, m.Value, want, values[want])
			}
		case err := <-pc.Errors():
			t.Fatalf("consuming %s: %v", key, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("read %d of %d records, then nothing for 30 s", want, n+1)
		}
	}
}

// saramaMember is one sarama consumer group running Consume in a loop, and what it saw:
// the claims of its latest session and every message it consumed.
type saramaMember struct {
	name  string
	group sarama.ConsumerGroup

	mu         sync.Mutex
	generation int32
	claims     []int32
	messages   []consumedRecord // as the shared checks in group_checks_test.go read them
	errs       []error

	cancel context.CancelFunc
	done   chan struct{}
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.generation = s.GenerationID()
	m.claims = nil
	for _, ps := range s.Claims() {
		m.claims = append(m.claims, ps...)
	}
	sort.Slice(m.claims, func(i, j int) bool { return m.claims[i] < m.claims[j] })
	return nil
}

// Cleanup commits what the session marked (auto-commit is off).
func (m *saramaMember) Cleanup(s sarama.ConsumerGroupSession) error {
	s.Commit()
	return nil
}

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			m.mu.Lock()
			m.messages = append(m.messages, consumedRecord{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset, Value: string(msg.Value)})
			m.mu.Unlock()
			s.MarkMessage(msg, "")
		case <-s.Context().Done():
			return nil
		}
	}
}

func (m *saramaMember) session() (int32, []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.generation, append([]int32(nil), m.claims...)
}

func (m *saramaMember) consumed() []consumedRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]consumedRecord(nil), m.messages...)
}

func startSaramaMember(t *testing.T, b *Broker, name, group, topic string) *saramaMember {
	t.Helper()
	cfg := saramaConfig(name)
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = time.Second
	cfg.Consumer.Return.Errors = true
	g, err := sarama.NewConsumerGroup([]string{b.Bootstrap}, group, cfg)
	if err != nil {
		t.Fatalf("sarama.NewConsumerGroup(%s): %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{name: name, group: g, cancel: cancel, done: make(chan struct{})}
	go func() {
		for err := range g.Errors() {
			m.mu.Lock()
			m.errs = append(m.errs, err)
			m.mu.Unlock()
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, m); err != nil && ctx.Err() == nil {
				m.mu.Lock()
				m.errs = append(m.errs, err)
				m.mu.Unlock()
				time.Sleep(100 * time.Millisecond) // a pause before rejoining, as a real consumer loop has
			}
		}
	}()
	t.Cleanup(func() { m.stop(t); g.Close() })
	return m
}

// stop ends the member's session (its Cleanup commits) and the Consume loop; the member
// stays in the group until its ConsumerGroup is closed.
func (m *saramaMember) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.errs) > 0 {
		t.Errorf("%s: consumer group errors: %v", m.name, m.errs)
		m.errs = nil
	}
}

// saramaProduce sends perPartition messages to each partition in one SendMessages call
// and returns their values by "partition/offset".
func saramaProduce(t *testing.T, p sarama.SyncProducer, topic string, partitions int32, perPartition int, tag string) map[string]string {
	t.Helper()
	var msgs []*sarama.ProducerMessage
	for i := 0; i < perPartition; i++ {
		for part := int32(0); part < partitions; part++ {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: part, Value: sarama.StringEncoder(fmt.Sprintf("%s p%d #%d", tag, part, i))})
		}
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatalf("SendMessages (%s): %v", tag, err)
	}
	produced := map[string]string{}
	for _, m := range msgs {
		v, _ := m.Value.Encode()
		produced[fmt.Sprintf("%d/%d", m.Partition, m.Offset)] = string(v)
	}
	if len(produced) != len(msgs) {
		t.Fatalf("%d messages produced at only %d distinct partition/offsets", len(msgs), len(produced))
	}
	return produced
}

func TestSaramaConsumerGroupCommitsAndResumes(t *testing.T) {
	saramaLogsTo(t)
	b := startBroker(t)
	const topic = "sarama-group"
	const group = "go-sarama-group"
	const partitions = 3
	adm := saramaAdmin(t, b)
	saramaCreateTopic(t, adm, topic, partitions)
	producer := newSyncProducer(t, b, "go-sarama-group-producer", true)

	m1 := startSaramaMember(t, b, "go-sarama-member-1", group, topic)
	m2 := startSaramaMember(t, b, "go-sarama-member-2", group, topic)
	waitFor(t, 60*time.Second, "both members to have claims in the same generation covering all 3 partitions", func() bool {
		g1, c1 := m1.session()
		g2, c2 := m2.session()
		return g1 == g2 && len(c1) > 0 && len(c2) > 0 && len(c1)+len(c2) == partitions
	})
	_, c1 := m1.session()
	_, c2 := m2.session()
	owner := partitionOwners(t, m1.name, c1, m2.name, c2)
	t.Logf("claims: %s %v, %s %v", m1.name, c1, m2.name, c2)

	const firstPerPartition = 40
	first := saramaProduce(t, producer, topic, partitions, firstPerPartition, "first")
	waitFor(t, 60*time.Second, fmt.Sprintf("the two members to consume %d messages", len(first)), func() bool {
		return len(m1.consumed())+len(m2.consumed()) >= len(first)
	})
	m1.stop(t)
	m2.stop(t)

	// Between them the members consumed every message once, each only from the topic's
	// partitions it claims.
	checkSplitConsumption(t, []memberRecords{{m1.name, m1.consumed()}, {m2.name, m2.consumed()}}, first,
		func(member string, r consumedRecord) bool { return r.Topic == topic && owner[r.Partition] == member })

	// checkCommitted checks the group's committed offset of every partition, as the
	// ClusterAdmin lists it.
	checkCommitted := func(want int64, when string) {
		t.Helper()
		ps := []int32{0, 1, 2}
		offsets, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: ps})
		if err != nil {
			t.Fatalf("ListConsumerGroupOffsets: %v", err)
		}
		for _, p := range ps {
			block := offsets.GetBlock(topic, p)
			if block == nil || !errors.Is(block.Err, sarama.ErrNoError) || block.Offset != want {
				t.Fatalf("committed offset of %s-%d %s: %+v; want %d", topic, p, when, block, want)
			}
		}
	}
	checkCommitted(firstPerPartition, "after the first sessions")

	// Both members leave; newer messages arrive; a new session of the group gets every
	// partition and starts after the committed offsets.
	m1.group.Close()
	m2.group.Close()
	const secondPerPartition = 10
	second := saramaProduce(t, producer, topic, partitions, secondPerPartition, "second")
	m3 := startSaramaMember(t, b, "go-sarama-member-3", group, topic)
	waitFor(t, 60*time.Second, fmt.Sprintf("the new session to consume %d messages", len(second)), func() bool {
		return len(m3.consumed()) >= len(second)
	})
	m3.stop(t)
	if _, c3 := m3.session(); len(c3) != partitions {
		t.Fatalf("the new session claims %v; want all %d partitions", c3, partitions)
	}
	checkResumedConsumption(t, "the new session", m3.consumed(), second, firstPerPartition)
	checkCommitted(firstPerPartition+secondPerPartition, "after the new session")
}
