// franz-go (github.com/twmb/franz-go) against the broker.
//
// TestFranzIdempotentProduceAcksAll shows that kgo's default producer (idempotent,
// acks=all: InitProducerId, then sequenced batches that each wait in the produce
// purgatory for both followers) gets every record its own offset, 0..N-1 in produce
// order, with zstd-compressed batches, and that a direct (assigned-partition) consumer reads
// back exactly those keys, values and headers at those offsets.
//
// TestFranzGroupConsumerSplitsAndResumes shows the classic group protocol with kgo's
// default (cooperative-sticky) balancer: two members of one group split a multi-partition
// topic, between them consume every record exactly once, commit, and a member that joins
// the group afterwards resumes from the committed offsets and sees only newer records.
package gotests

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func kgoLogger(t *testing.T, name string) kgo.Opt {
	return kgo.WithLogger(kgo.BasicLogger(newTestLog(t, name), kgo.LogLevelInfo, nil))
}

// newKgo creates a franz-go client on the broker, closed when the test ends.
func newKgo(t *testing.T, b *Broker, name string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, _ := newKgoCloser(t, b, name, opts...)
	return cl
}

// newKgoCloser is newKgo, also returning a close function that may be called before the
// test ends (the cleanup then does nothing).
func newKgoCloser(t *testing.T, b *Broker, name string, opts ...kgo.Opt) (*kgo.Client, func()) {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(b.Bootstrap),
		kgo.ClientID(name),
		kgoLogger(t, name),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo.NewClient(%s): %v", name, err)
	}
	var once sync.Once
	closeFn := func() { once.Do(cl.Close) }
	t.Cleanup(closeFn)
	return cl, closeFn
}

// createTopic creates a topic with kadm (CreateTopics) and checks the broker's answer.
func createTopic(t *testing.T, b *Broker, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(newKgo(t, b, "go-kadm"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topic)
	if err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
	if resp.Err != nil {
		t.Fatalf("CreateTopic %s: %v (%s)", topic, resp.Err, resp.ErrMessage)
	}
	if resp.NumPartitions != partitions || resp.ReplicationFactor != 3 {
		t.Fatalf("CreateTopic %s answered %d partitions, replication factor %d; want %d, 3",
			topic, resp.NumPartitions, resp.ReplicationFactor, partitions)
	}
}

func TestFranzIdempotentProduceAcksAll(t *testing.T) {
	b := startBroker(t)
	const topic = "franz-idempotent"
	const n = 1000
	createTopic(t, b, topic, 1)

	producer := newKgo(t, b, "go-franz-producer",
		// kgo's defaults are acks=all and idempotence; say acks=all explicitly so that
		// the test does not depend on a default changing.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.DefaultProduceTopic(topic),
	)

	records := make([]*kgo.Record, n)
	for i := range records {
		records[i] = &kgo.Record{
			Key:     []byte(fmt.Sprintf("key-%04d", i)),
			Value:   []byte(fmt.Sprintf("value %d: %s", i, string(make([]byte, i%50)))),
			Headers: []kgo.RecordHeader{{Key: "index", Value: []byte(fmt.Sprint(i))}},
		}
	}
	type result struct {
		offset    int64
		partition int32
		pid       int64
		err       error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, r := range records {
		wg.Add(1)
		producer.Produce(ctx, r, func(r *kgo.Record, err error) {
			results[i] = result{r.Offset, r.Partition, r.ProducerID, err}
			wg.Done()
		})
	}
	wg.Wait()

	for i, res := range results {
		if res.err != nil {
			t.Fatalf("record %d: produce failed: %v", i, res.err)
		}
		if res.partition != 0 || res.offset != int64(i) {
			t.Fatalf("record %d was written at partition %d offset %d; want partition 0 offset %d",
				i, res.partition, res.offset, i)
		}
		if res.pid < 0 {
			t.Fatalf("record %d was produced without a producer id (%d): the producer is not idempotent", i, res.pid)
		}
	}

	// acks=all answered only once both followers had the records: the high watermark is
	// at the log end.
	for _, p := range b.State(t).Partitions {
		if p.Topic == topic && (p.HighWatermark != n || p.LogEndOffset != n) {
			t.Fatalf("%s-%d: HW %d, LEO %d after %d acks=all records; want both %d", topic, p.Partition, p.HighWatermark, p.LogEndOffset, n, n)
		}
	}

	consumer := newKgo(t, b, "go-franz-direct-consumer",
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
	)
	var got []*kgo.Record
	for len(got) < n {
		pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
		fetches := consumer.PollFetches(pctx)
		timedOut := pctx.Err() != nil
		pcancel()
		if timedOut {
			t.Fatalf("consumed %d of %d records, then nothing more for 30 s", len(got), n)
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			t.Fatalf("fetch errors: %v", errs)
		}
		got = append(got, fetches.Records()...)
	}
	if len(got) != n {
		t.Fatalf("consumed %d records; want %d", len(got), n)
	}
	for i, r := range got {
		want := records[i]
		if r.Partition != 0 || r.Offset != int64(i) {
			t.Fatalf("record %d read at partition %d offset %d", i, r.Partition, r.Offset)
		}
		if string(r.Key) != string(want.Key) || string(r.Value) != string(want.Value) {
			t.Fatalf("offset %d: read key %q value %q; produced key %q value %q", i, r.Key, r.Value, want.Key, want.Value)
		}
		if c := r.Attrs.CompressionType(); c != 4 {
			t.Fatalf("offset %d: read from a batch with compression type %d; it was produced zstd-compressed (4)", i, c)
		}
		if len(r.Headers) != 1 || r.Headers[0].Key != "index" || string(r.Headers[0].Value) != fmt.Sprint(i) {
			t.Fatalf("offset %d: read headers %v; produced %v", i, r.Headers, want.Headers)
		}
	}
}

// groupMember is one kgo group consumer and what it has seen: its current assignment
// (kept from the assigned/revoked callbacks) and the records it has polled.
type groupMember struct {
	name  string
	cl    *kgo.Client
	close func() // leaves the group and closes the client

	mu       sync.Mutex
	assigned map[int32]bool
	records  []consumedRecord // as the shared checks in group_checks_test.go read them

	stop    context.CancelFunc
	stopped chan struct{}
	pollErr error
}

func startGroupMember(t *testing.T, b *Broker, name, group, topic string) *groupMember {
	t.Helper()
	m := &groupMember{name: name, assigned: map[int32]bool{}, stopped: make(chan struct{})}
	// A partition revoked in a rebalance and one lost (the member fell out of the group)
	// are alike here: the member no longer holds them.
	forget := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range ps[topic] {
			delete(m.assigned, p)
		}
	}
	m.cl, m.close = newKgoCloser(t, b, name,
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(10*time.Second),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ps[topic] {
				m.assigned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(forget),
		kgo.OnPartitionsLost(forget),
	)
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go func() {
		defer close(m.stopped)
		for ctx.Err() == nil {
			fetches := m.cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			var err error
			fetches.EachError(func(topic string, p int32, e error) {
				err = fmt.Errorf("%s-%d: %w", topic, p, e)
			})
			m.mu.Lock()
			for _, r := range fetches.Records() {
				m.records = append(m.records, consumedRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			}
			if err != nil && m.pollErr == nil {
				m.pollErr = err
			}
			m.mu.Unlock()
		}
	}()
	return m
}

func (m *groupMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p := range m.assigned {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func (m *groupMember) consumed() []consumedRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]consumedRecord(nil), m.records...)
}

// stopPolling ends the poll loop (the member stays in the group).
func (m *groupMember) stopPolling(t *testing.T) {
	t.Helper()
	m.stop()
	<-m.stopped
	if m.pollErr != nil {
		t.Fatalf("%s: fetch error: %v", m.name, m.pollErr)
	}
}

// produceToPartitions writes perPartition records to each partition (kgo's manual
// partitioner) and returns them by "partition/offset".
func produceToPartitions(t *testing.T, cl *kgo.Client, topic string, partitions int32, perPartition int, tag string) map[string]string {
	t.Helper()
	var rs []*kgo.Record
	for i := 0; i < perPartition; i++ {
		for p := int32(0); p < partitions; p++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s p%d #%d", tag, p, i))})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	results := cl.ProduceSync(ctx, rs...)
	if err := results.FirstErr(); err != nil {
		t.Fatalf("producing %s: %v", tag, err)
	}
	produced := map[string]string{}
	for _, r := range results {
		produced[fmt.Sprintf("%d/%d", r.Record.Partition, r.Record.Offset)] = string(r.Record.Value)
	}
	if len(produced) != len(rs) {
		t.Fatalf("%d records produced at only %d distinct partition/offsets", len(rs), len(produced))
	}
	return produced
}

func TestFranzGroupConsumerSplitsAndResumes(t *testing.T) {
	b := startBroker(t)
	const topic = "franz-group"
	const group = "go-franz-group"
	const partitions = 4
	createTopic(t, b, topic, partitions)
	producer := newKgo(t, b, "go-franz-group-producer", kgo.RecordPartitioner(kgo.ManualPartitioner()))

	// Two members join; wait until the group has settled with the partitions split
	// between them (the cooperative-sticky balancer may take two rebalances).
	m1 := startGroupMember(t, b, "go-franz-member-1", group, topic)
	m2 := startGroupMember(t, b, "go-franz-member-2", group, topic)
	waitFor(t, 60*time.Second, "both members to hold 2 of the 4 partitions", func() bool {
		p1, p2 := m1.partitions(), m2.partitions()
		return len(p1) == 2 && len(p2) == 2
	})
	p1, p2 := m1.partitions(), m2.partitions()
	owner := partitionOwners(t, m1.name, p1, m2.name, p2)
	t.Logf("assignment: %s %v, %s %v", m1.name, p1, m2.name, p2)

	// The broker's view of the group agrees: Stable, two members, the same split.
	adm := kadm.NewClient(producer)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatalf("DescribeGroups: %v", err)
	}
	dg := described[group]
	if dg.Err != nil || dg.State != "Stable" || len(dg.Members) != 2 {
		t.Fatalf("DescribeGroups %s: err %v, state %q, %d members; want Stable with 2", group, dg.Err, dg.State, len(dg.Members))
	}
	for _, member := range dg.Members {
		assigned, _ := member.Assigned.AsConsumer()
		if assigned == nil {
			t.Fatalf("DescribeGroups: member %s (%s) has no consumer assignment", member.MemberID, member.ClientID)
		}
		var want []int32
		switch member.ClientID {
		case m1.name:
			want = p1
		case m2.name:
			want = p2
		default:
			t.Fatalf("DescribeGroups: unexpected member client id %q", member.ClientID)
		}
		var got []int32
		for _, tp := range assigned.Topics {
			if tp.Topic == topic {
				got = append(got, tp.Partitions...)
			}
		}
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("DescribeGroups says %s holds %v; the client holds %v", member.ClientID, got, want)
		}
	}

	const firstPerPartition = 50
	first := produceToPartitions(t, producer, topic, partitions, firstPerPartition, "first")
	total := partitions * firstPerPartition
	waitFor(t, 60*time.Second, fmt.Sprintf("the two members to consume %d records", total), func() bool {
		return len(m1.consumed())+len(m2.consumed()) >= total
	})
	m1.stopPolling(t)
	m2.stopPolling(t)

	// Between them the members consumed every record once, each only from the partitions
	// assigned to it.
	checkSplitConsumption(t, []memberRecords{{m1.name, m1.consumed()}, {m2.name, m2.consumed()}}, first,
		func(member string, r consumedRecord) bool { return owner[r.Partition] == member })

	for _, m := range []*groupMember{m1, m2} {
		if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("%s: commit: %v", m.name, err)
		}
	}
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("FetchOffsets: %v", err)
	}
	for p := int32(0); p < partitions; p++ {
		o, ok := offsets.Lookup(topic, p)
		if !ok || o.Err != nil || o.At != firstPerPartition {
			t.Fatalf("committed offset of %s-%d: %+v (found %v); want %d", topic, p, o, ok, firstPerPartition)
		}
	}

	// Both members leave; newer records arrive; a restarted member gets every partition
	// and resumes at the committed offsets, so it reads only the newer records.
	m1.close()
	m2.close()
	const secondPerPartition = 10
	second := produceToPartitions(t, producer, topic, partitions, secondPerPartition, "second")
	m3 := startGroupMember(t, b, "go-franz-member-3", group, topic)
	waitFor(t, 60*time.Second, fmt.Sprintf("the restarted member to consume %d records", len(second)), func() bool {
		return len(m3.consumed()) >= len(second)
	})
	m3.stopPolling(t)
	if ps := m3.partitions(); len(ps) != partitions {
		t.Fatalf("the restarted member holds partitions %v; want all %d", ps, partitions)
	}
	checkResumedConsumption(t, "the restarted member", m3.consumed(), second, firstPerPartition)
}
