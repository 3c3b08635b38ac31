package gotests

// Transactional producers in Go, franz-go's (kgo.TransactionalID) and IBM Sarama's,
// against the broker's transaction coordinator: a committed, an aborted and another
// committed transaction, read back by a read_committed consumer, which sees only the
// committed records (and for franz-go by a read_uncommitted one, which sees them all).

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// threeTransactions is what each producer writes: a commit, an abort, a commit.
var threeTransactions = []struct {
	values []string
	commit bool
}{
	{[]string{"committed-1", "committed-2"}, true},
	{[]string{"aborted-1"}, false},
	{[]string{"committed-3"}, true},
}

func TestFranzTransactionsCommitAndAbortAsReadCommittedSeesThem(t *testing.T) {
	b := startBroker(t)
	const topic = "go-txn"
	createTopic(t, b, topic, 1)
	producer := newKgo(t, b, "go-txn-producer",
		kgo.TransactionalID("go-txn-id"),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, txn := range threeTransactions {
		if err := producer.BeginTransaction(); err != nil {
			t.Fatalf("BeginTransaction: %v", err)
		}
		for _, v := range txn.values {
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: 0}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TransactionEndTry(txn.commit)); err != nil {
			t.Fatalf("EndTransaction(commit=%v): %v", txn.commit, err)
		}
	}
	// The broker finalizes transaction.version 2, so franz-go lets Produce v12 add the
	// partition and EndTxn v5 move the epoch on with every transaction: 0, then 3.
	described, err := kadm.NewClient(producer).DescribeTransactions(ctx, "go-txn-id")
	if err != nil {
		t.Fatalf("DescribeTransactions: %v", err)
	}
	if d, ok := described["go-txn-id"]; !ok || d.ProducerEpoch != int16(len(threeTransactions)) {
		t.Fatalf("after %d transactions the epoch is %+v, want %d", len(threeTransactions), described, len(threeTransactions))
	}
	read := func(name string, isolation kgo.IsolationLevel, want int) []string {
		consumer := newKgo(t, b, name,
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(isolation))
		var got []string
		deadline := time.Now().Add(20 * time.Second)
		for len(got) < want && time.Now().Before(deadline) {
			pollCtx, stop := context.WithTimeout(ctx, 500*time.Millisecond)
			consumer.PollFetches(pollCtx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			stop()
		}
		return got
	}
	if got, want := read("go-txn-committed", kgo.ReadCommitted(), 3), []string{"committed-1", "committed-2", "committed-3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read_committed read %v, want %v", got, want)
	}
	if got, want := read("go-txn-uncommitted", kgo.ReadUncommitted(), 4), []string{"committed-1", "committed-2", "aborted-1", "committed-3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read_uncommitted read %v, want %v", got, want)
	}
}

// IBM Sarama's transactional producer: the same three transactions, read back by a
// read_committed franz-go consumer.
func TestSaramaTransactionsCommitAndAbort(t *testing.T) {
	saramaLogsTo(t)
	b := startBroker(t)
	const topic = "go-sarama-txn"
	createTopic(t, b, topic, 1)
	cfg := sarama.NewConfig()
	cfg.Version = saramaVersion
	cfg.ClientID = "go-sarama-txn"
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Transaction.ID = "go-sarama-txn-id"
	cfg.Net.MaxOpenRequests = 1
	producer, err := sarama.NewSyncProducer([]string{b.Bootstrap}, cfg)
	if err != nil {
		t.Fatalf("NewSyncProducer: %v", err)
	}
	defer producer.Close()
	for _, txn := range threeTransactions {
		if err := producer.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn: %v", err)
		}
		for _, v := range txn.values {
			if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatalf("send %s: %v", v, err)
			}
		}
		end := producer.AbortTxn
		if txn.commit {
			end = producer.CommitTxn
		}
		if err := end(); err != nil {
			t.Fatalf("end of transaction (commit=%v): %v", txn.commit, err)
		}
	}
	consumer := newKgo(t, b, "go-sarama-txn-reader",
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		ctx, stop := context.WithTimeout(context.Background(), 500*time.Millisecond)
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		stop()
	}
	if want := []string{"committed-1", "committed-2", "committed-3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read_committed read %v, want %v", got, want)
	}
}
