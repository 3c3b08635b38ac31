// Checks shared by the franz-go and the Sarama consumer-group tests. Both tests run the same
// story (two members split a topic, consume it, commit; a later member resumes after the
// commit), and each client reports what a member consumed in its own type. The members
// keep what they consume as consumedRecord, so that one function checks both the same way.
package gotests

import (
	"fmt"
	"testing"
)

// consumedRecord is one record a group member consumed: where it was and what it held.
type consumedRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Value     string
}

// key is the record's "partition/offset", the key that produceToPartitions and
// saramaProduce return the produced values by.
func (r consumedRecord) key() string {
	return fmt.Sprintf("%d/%d", r.Partition, r.Offset)
}

// memberRecords is what one group member, named by its client id, consumed.
type memberRecords struct {
	name    string
	records []consumedRecord
}

// partitionOwners maps each partition to the one of two members that holds it, and fails
// the test if both members hold the same partition.
func partitionOwners(t *testing.T, name1 string, p1 []int32, name2 string, p2 []int32) map[int32]string {
	t.Helper()
	owner := map[int32]string{}
	for _, p := range p1 {
		owner[p] = name1
	}
	for _, p := range p2 {
		if owner[p] != "" {
			t.Fatalf("partition %d held by both members (%v, %v)", p, p1, p2)
		}
		owner[p] = name2
	}
	return owner
}

// checkSplitConsumption checks what the members of one group consumed between them: each
// member consumed something, only records that owns says are from its own partitions, no
// record was consumed twice, each has the value produced at its partition/offset, and
// together they consumed every produced record.
func checkSplitConsumption(t *testing.T, members []memberRecords, produced map[string]string,
	owns func(member string, r consumedRecord) bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range members {
		if len(m.records) == 0 {
			t.Fatalf("%s consumed nothing", m.name)
		}
		for _, r := range m.records {
			key := r.key()
			if !owns(m.name, r) {
				t.Fatalf("%s consumed %s %s, which is not from a partition it holds", m.name, r.Topic, key)
			}
			if seen[key] {
				t.Fatalf("record %s consumed twice", key)
			}
			seen[key] = true
			if want, ok := produced[key]; !ok || r.Value != want {
				t.Fatalf("%s read %q at %s; produced %q there", m.name, r.Value, key, want)
			}
		}
	}
	if len(seen) != len(produced) {
		t.Fatalf("consumed %d distinct records; produced %d", len(seen), len(produced))
	}
}

// checkResumedConsumption checks what a member that joined the group after the commit
// consumed: exactly the records produced since, each with the value produced at its
// partition/offset, and none from before the committed offset.
func checkResumedConsumption(t *testing.T, who string, got []consumedRecord, produced map[string]string, committed int) {
	t.Helper()
	if len(got) != len(produced) {
		t.Fatalf("%s consumed %d records; %d were produced after the commit", who, len(got), len(produced))
	}
	for _, r := range got {
		key := r.key()
		want, ok := produced[key]
		if !ok {
			t.Fatalf("%s read %s (%q), which was before the committed offset %d", who, key, r.Value, committed)
		}
		if r.Value != want {
			t.Fatalf("%s read %q at %s; produced %q there", who, r.Value, key, want)
		}
	}
}
