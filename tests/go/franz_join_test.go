// The classic JoinGroup handshake step by step, with franz-go's protocol layer (kmsg
// requests sent by real kgo clients, one connection per member, as two consumer processes
// would have).
//
// TestPendingMemberIDSurvivesRebalance shows what happens to a member id handed out with
// MEMBER_ID_REQUIRED while another member's join completes a rebalance. In Kafka the id
// stays pending (only its own session timeout removes it: GroupMetadataManager's
// completeClassicGroupJoin removes members that did not rejoin, not pending ids), so the
// member's JoinGroup with that id is accepted and starts the next rebalance. Two consumers
// started together hit exactly this: with group.initial.rebalance.delay.ms=0 the first to
// rejoin completes generation 1 alone, the other rejoins a moment later.
package gotests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinGroup sends one JoinGroup (v9) for a consumer subscribed to topic.
func joinGroup(ctx context.Context, cl *kgo.Client, group, memberID, topic string) (*kmsg.JoinGroupResponse, error) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group = group
	req.MemberID = memberID
	req.SessionTimeoutMillis = 10000
	req.RebalanceTimeoutMillis = 30000
	req.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{topic}
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name = "range"
	proto.Metadata = meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, proto)
	return req.RequestWith(ctx, cl)
}

// mustJoinGroup is joinGroup, failing the test if the request gets no response.
func mustJoinGroup(ctx context.Context, t *testing.T, cl *kgo.Client, group, memberID, topic string) *kmsg.JoinGroupResponse {
	t.Helper()
	resp, err := joinGroup(ctx, cl, group, memberID, topic)
	if err != nil {
		t.Fatalf("JoinGroup (member id %q): %v", memberID, err)
	}
	return resp
}

func TestPendingMemberIDSurvivesRebalance(t *testing.T) {
	b := startBroker(t)
	const topic = "join-handshake"
	const group = "go-join-handshake"
	createTopic(t, b, topic, 2)
	clA := newKgo(t, b, "go-join-member-a")
	clB := newKgo(t, b, "go-join-member-b")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Both members ask to join; each is handed an id and must come back with it.
	a := mustJoinGroup(ctx, t, clA, group, "", topic)
	bResp := mustJoinGroup(ctx, t, clB, group, "", topic)
	for name, r := range map[string]*kmsg.JoinGroupResponse{"A": a, "B": bResp} {
		if err := kerr.ErrorForCode(r.ErrorCode); !errors.Is(err, kerr.MemberIDRequired) || r.MemberID == "" {
			t.Fatalf("member %s's first JoinGroup: error %v, member id %q; want MEMBER_ID_REQUIRED with an id", name, err, r.MemberID)
		}
	}
	idA, idB := a.MemberID, bResp.MemberID

	// A comes back first: the group was Empty and the initial delay is 0, so generation 1
	// completes with A alone.
	a1 := mustJoinGroup(ctx, t, clA, group, idA, topic)
	if err := kerr.ErrorForCode(a1.ErrorCode); err != nil || a1.Generation != 1 || a1.LeaderID != idA || len(a1.Members) != 1 {
		t.Fatalf("A's JoinGroup with its id: error %v, generation %d, leader %q, %d members; want generation 1 led by A alone",
			err, a1.Generation, a1.LeaderID, len(a1.Members))
	}

	// B comes back with its pending id. Kafka accepts it and starts a rebalance: B's
	// JoinGroup waits until A rejoins too.
	type joinResult struct {
		resp *kmsg.JoinGroupResponse
		err  error
	}
	bDone := make(chan joinResult, 1)
	go func() {
		resp, err := joinGroup(ctx, clB, group, idB, topic)
		bDone <- joinResult{resp, err}
	}()
	adm := kadm.NewClient(newKgo(t, b, "go-join-admin"))
	var early *joinResult
	waitFor(t, 30*time.Second, "B's JoinGroup to be answered or the group to be rebalancing", func() bool {
		select {
		case r := <-bDone:
			early = &r
			return true
		default:
		}
		described, err := adm.DescribeGroups(ctx, group)
		return err == nil && described[group].State == "PreparingRebalance"
	})
	if early != nil {
		if early.err != nil {
			t.Fatalf("B's JoinGroup with its pending id %q: %v", idB, early.err)
		}
		t.Fatalf("B's JoinGroup with its pending id %q was answered at once: error %v, generation %d; want it accepted (it waits for the rebalance that adds B)",
			idB, kerr.ErrorForCode(early.resp.ErrorCode), early.resp.Generation)
	}

	// A learns of the rebalance and rejoins: generation 2 has both members.
	a2 := mustJoinGroup(ctx, t, clA, group, idA, topic)
	var b2 *kmsg.JoinGroupResponse
	select {
	case r := <-bDone:
		if r.err != nil {
			t.Fatalf("B's JoinGroup with its pending id %q: %v", idB, r.err)
		}
		b2 = r.resp
	case <-time.After(30 * time.Second):
		t.Fatalf("B's JoinGroup not answered within 30 s of A rejoining")
	}
	if err := kerr.ErrorForCode(b2.ErrorCode); err != nil || b2.MemberID != idB || b2.Generation != 2 {
		t.Fatalf("B's JoinGroup: error %v, member id %q, generation %d; want member %q in generation 2", err, b2.MemberID, b2.Generation, idB)
	}
	if err := kerr.ErrorForCode(a2.ErrorCode); err != nil || a2.Generation != 2 || a2.LeaderID != idA || len(a2.Members) != 2 {
		t.Fatalf("A's rejoin: error %v, generation %d, leader %q, %d members; want generation 2 led by A with 2 members",
			err, a2.Generation, a2.LeaderID, len(a2.Members))
	}
}
