package converge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	pb "converge.dev/sdk-go/gen/workerv1"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func complete(token string) *pb.StageComplete { return &pb.StageComplete{LeaseToken: token} }

func TestUnackedDropsTheOldestBeyondItsCap(t *testing.T) {
	u := newUnacked()
	for i := 0; i < maxUnacked; i++ {
		if _, dropped := u.push(leaseKey{fmt.Sprintf("t%d", i), 1}, complete("x")); dropped {
			t.Fatalf("dropped before the cap at %d", i)
		}
	}
	old, dropped := u.push(leaseKey{"new", 1}, complete("new"))
	if !dropped || old != (leaseKey{"t0", 1}) || u.len() != maxUnacked {
		t.Fatalf("cap: dropped=%v old=%v len=%d", dropped, old, u.len())
	}
	if _, ok := u.get(leaseKey{"t0", 1}); ok {
		t.Fatal("the dropped result is still kept")
	}
	// Re-keeping the same lease replaces it instead of growing the buffer.
	if _, dropped := u.push(leaseKey{"new", 1}, complete("again")); dropped || u.len() != maxUnacked {
		t.Fatal("re-keeping a lease grew the buffer")
	}
	if c, _ := u.get(leaseKey{"new", 1}); c.LeaseToken != "again" {
		t.Fatal("re-keeping did not replace the result")
	}
	if !u.remove(leaseKey{"new", 1}) || u.remove(leaseKey{"new", 1}) {
		t.Fatal("remove must succeed exactly once")
	}
	// A different epoch is a different lease.
	if _, ok := u.get(leaseKey{"t1", 2}); ok {
		t.Fatal("epoch ignored")
	}
}

func TestUnackedKeepsOrderAndCompacts(t *testing.T) {
	u := newUnacked()
	for i := 0; i < 500; i++ {
		u.push(leaseKey{fmt.Sprintf("t%d", i), 1}, complete(fmt.Sprintf("t%d", i)))
	}
	for i := 0; i < 500; i += 2 {
		u.remove(leaseKey{fmt.Sprintf("t%d", i), 1})
	}
	var seen []string
	u.each(func(_ leaseKey, c *pb.StageComplete) { seen = append(seen, c.LeaseToken) })
	if len(seen) != 250 || seen[0] != "t1" || seen[249] != "t499" {
		t.Fatalf("order after removals: %d entries, first %v", len(seen), seen[:2])
	}
	if len(u.order) > 2*u.len()+64 {
		t.Fatalf("order slice not compacted: %d for %d live", len(u.order), u.len())
	}
}

// drain returns the frames queued on ob.
func drain(ob *outbox) []*pb.WorkStreamClientMsg {
	frames, _ := ob.take()
	return frames
}

func testState() (*state, *registry) {
	reg, _ := newRegistry([]Provider{ProviderFunc(KindVersion{"a", 1}, nil), ProviderFunc(KindVersion{"b", 2}, nil)}, nil)
	return newState(reg, quietLog()), reg
}

func TestResultsAreKeptUntilAckedAndResentOnTheNextSession(t *testing.T) {
	st, reg := testState()
	cfg := NewConfig("127.0.0.1:1")
	ob1 := newOutbox(1)
	st.openSession(ob1, reg, &cfg, []readiness{{KindVersion{"a", 1}, true}, {KindVersion{"b", 2}, false}})
	frames := drain(ob1)
	sub := frames[0].GetSubscribe()
	if sub == nil || sub.Sdk != "go/"+Version || sub.MaxInflight != 16 || len(sub.Kinds) != 2 || sub.KindVersions[1] != 2 || len(sub.Resumed) != 0 {
		t.Fatalf("first frame must be Subscribe: %v", frames[0])
	}
	if len(frames) != 2 || frames[1].GetInterest().GetKind() != "b" || frames[1].GetInterest().GetHasWorker() {
		t.Fatalf("an unready kind must be announced right after Subscribe: %v", frames)
	}

	k1, k2 := leaseKey{"l1", 1}, leaseKey{"l2", 1}
	if adm, _ := st.admit(context.Background(), k1); adm != admitRun {
		t.Fatal("first delivery must run")
	}
	if adm, _ := st.admit(context.Background(), k1); adm != admitDuplicate {
		t.Fatal("a duplicate of a running task must be ignored")
	}
	st.admit(context.Background(), k2)
	st.finish(k1, complete("l1"))
	if got := drain(ob1); len(got) != 1 || got[0].GetComplete().GetLeaseToken() != "l1" {
		t.Fatalf("the result must be sent at once: %v", got)
	}
	if adm, _ := st.admit(context.Background(), k1); adm != admitResent || drain(ob1)[0].GetComplete() == nil {
		t.Fatal("a re-delivered finished task must re-send its kept result")
	}

	// The stream drops before the ack: the next session lists both leases and re-sends.
	st.closeSession(ob1)
	ob2 := newOutbox(2)
	st.openSession(ob2, reg, &cfg, nil)
	frames = drain(ob2)
	resumed := map[string]bool{}
	for _, r := range frames[0].GetSubscribe().GetResumed() {
		resumed[r.LeaseToken] = true
	}
	if !resumed["l1"] || !resumed["l2"] || len(frames) != 2 || frames[1].GetComplete().GetLeaseToken() != "l1" {
		t.Fatalf("resume: %v", frames)
	}
	st.ack(k1, true)
	if n := st.outstanding(); n != 1 {
		t.Fatalf("an acked result must be forgotten; outstanding %d", n)
	}
	// A refused (stale) result is dropped too, never retried.
	st.finish(k2, complete("l2"))
	st.ack(k2, false)
	if n := st.outstanding(); n != 0 {
		t.Fatalf("outstanding %d after every ack", n)
	}
}

func TestCancelTaskCancelsAndDropsTheResult(t *testing.T) {
	st, reg := testState()
	cfg := NewConfig("127.0.0.1:1")
	ob := newOutbox(1)
	st.openSession(ob, reg, &cfg, nil)
	drain(ob)
	k := leaseKey{"l", 3}
	_, ctx := st.admit(context.Background(), k)
	if !st.cancelTask(k, CancelQuarantined) || ctx.Err() == nil {
		t.Fatal("CancelTask must cancel the task's context")
	}
	if got := CancelReason(ctx); got != CancelQuarantined {
		t.Fatalf("the handler must see the broker's reason, got %q", got)
	}
	_, other := st.admit(context.Background(), leaseKey{"s", 1})
	if CancelReason(other) != "" {
		t.Fatal("a running task has no cancel reason")
	}
	st.cancelAll()
	if got := CancelReason(other); got != CancelShutdown {
		t.Fatalf("shutdown cancels with reason shutdown, got %q", got)
	}
	st.finish(k, complete("l"))
	if got := drain(ob); len(got) != 0 || st.outstanding() != 0 {
		t.Fatalf("a cancelled task's result must not be sent: %v", got)
	}
}

func TestHeartbeatListsEveryRunningTaskInOneFrame(t *testing.T) {
	st, reg := testState()
	if st.heartbeat() != 0 {
		t.Fatal("no heartbeat without tasks")
	}
	cfg := NewConfig("127.0.0.1:1")
	ob := newOutbox(1)
	st.openSession(ob, reg, &cfg, nil)
	drain(ob)
	st.admit(context.Background(), leaseKey{"x", 1})
	st.admit(context.Background(), leaseKey{"y", 2})
	if st.heartbeat() != 2 {
		t.Fatal("heartbeat count")
	}
	hb := drain(ob)[0].GetHeartbeat()
	if len(hb.LeaseToken) != 2 || len(hb.ClaimEpoch) != 2 {
		t.Fatalf("heartbeat: %v", hb)
	}
	for i, tok := range hb.LeaseToken {
		if want := map[string]int64{"x": 1, "y": 2}[tok]; hb.ClaimEpoch[i] != want {
			t.Fatalf("epochs not parallel to tokens: %v", hb)
		}
	}
}

func TestReadinessEdgesAndShutdown(t *testing.T) {
	st, reg := testState()
	cfg := NewConfig("127.0.0.1:1")
	ob := newOutbox(1)
	st.openSession(ob, reg, &cfg, nil)
	drain(ob)
	a := KindVersion{"a", 1}
	st.updateReadiness([]readiness{{a, true}})
	if len(drain(ob)) != 0 {
		t.Fatal("no edge, no frame")
	}
	st.updateReadiness([]readiness{{a, false}})
	st.updateReadiness([]readiness{{a, false}})
	if got := drain(ob); len(got) != 1 || got[0].GetInterest().GetHasWorker() {
		t.Fatalf("one Interest per edge: %v", got)
	}
	st.beginShutdown()
	got := drain(ob)
	if len(got) != 1 || got[0].GetInterest().GetKind() != "b" {
		t.Fatalf("shutdown must flip every still-ready pair off: %v", got)
	}
	st.updateReadiness([]readiness{{a, true}})
	if len(drain(ob)) != 0 {
		t.Fatal("no readiness flips after shutdown began")
	}
}

func TestWaitOutstandingZero(t *testing.T) {
	st, _ := testState()
	k := leaseKey{"l", 1}
	st.admit(context.Background(), k)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if st.waitOutstandingZero(ctx) {
		t.Fatal("returned true with a task running")
	}
	go func() {
		st.finish(k, complete("l"))
		st.ack(k, true)
	}()
	if !st.waitOutstandingZero(context.Background()) {
		t.Fatal("did not see the count reach zero")
	}
}
