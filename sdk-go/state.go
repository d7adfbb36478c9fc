package converge

import (
	"context"
	"log/slog"
	"sync"

	pb "converge.dev/sdk-go/gen/workerv1"
)

// maxUnacked bounds the results kept while waiting for their CompleteAck.
const maxUnacked = 1024

// leaseKey is a lease as the broker fences it: token plus claim epoch.
type leaseKey struct {
	token string
	epoch int64
}

// unacked holds results waiting for an ack, oldest first, so a resend after a reconnect
// keeps their original order and the cap drops the oldest.
type unacked struct {
	nextSeq uint64
	order   []uint64 // sequence numbers, ascending; may hold removed ones (skipped lazily)
	bySeq   map[uint64]unackedEntry
	byKey   map[leaseKey]uint64
}

type unackedEntry struct {
	key      leaseKey
	complete *pb.StageComplete
}

func newUnacked() *unacked {
	return &unacked{bySeq: make(map[uint64]unackedEntry), byKey: make(map[leaseKey]uint64)}
}

func (u *unacked) len() int { return len(u.bySeq) }

func (u *unacked) get(k leaseKey) (*pb.StageComplete, bool) {
	seq, ok := u.byKey[k]
	if !ok {
		return nil, false
	}
	return u.bySeq[seq].complete, true
}

func (u *unacked) remove(k leaseKey) bool {
	seq, ok := u.byKey[k]
	if !ok {
		return false
	}
	delete(u.byKey, k)
	delete(u.bySeq, seq)
	u.compact()
	return true
}

// push keeps c; it returns the key of the oldest result dropped to respect the cap.
func (u *unacked) push(k leaseKey, c *pb.StageComplete) (leaseKey, bool) {
	u.remove(k)
	seq := u.nextSeq
	u.nextSeq++
	u.byKey[k] = seq
	u.bySeq[seq] = unackedEntry{key: k, complete: c}
	u.order = append(u.order, seq)
	if len(u.bySeq) <= maxUnacked {
		return leaseKey{}, false
	}
	for len(u.order) > 0 {
		seq := u.order[0]
		u.order = u.order[1:]
		if e, ok := u.bySeq[seq]; ok {
			delete(u.bySeq, seq)
			delete(u.byKey, e.key)
			return e.key, true
		}
	}
	return leaseKey{}, false
}

// compact drops removed sequence numbers once they dominate the order slice, so it stays
// proportional to the live entries.
func (u *unacked) compact() {
	if len(u.order) < 64 || len(u.order) < 2*len(u.bySeq) {
		return
	}
	live := u.order[:0]
	for _, s := range u.order {
		if _, ok := u.bySeq[s]; ok {
			live = append(live, s)
		}
	}
	u.order = live
}

// each visits the kept results oldest first.
func (u *unacked) each(f func(leaseKey, *pb.StageComplete)) {
	for _, s := range u.order {
		if e, ok := u.bySeq[s]; ok {
			f(e.key, e.complete)
		}
	}
}

// running is a task accepted from the broker whose handler has not returned.
type running struct {
	cancel context.CancelCauseFunc
}

// state is what every loop of the runtime shares for the worker's whole life. One mutex
// guards it, is never held across user code or network I/O, and every frame is queued
// onto the current session's outbox while it is held, so frames built from one consistent
// view are sent in order (the Subscribe burst cannot interleave with a result).
type state struct {
	log *slog.Logger

	mu           sync.Mutex
	running      map[leaseKey]*running
	unacked      *unacked
	session      *outbox
	configs      map[KindVersion]ProviderConfig
	advertised   map[KindVersion]bool // readiness last told to the broker
	shuttingDown bool
	// changed is closed and replaced whenever running+unacked changes (a broadcast).
	changed chan struct{}
}

func newState(reg *registry, log *slog.Logger) *state {
	st := &state{
		log:        log,
		running:    make(map[leaseKey]*running),
		unacked:    newUnacked(),
		configs:    make(map[KindVersion]ProviderConfig),
		advertised: make(map[KindVersion]bool),
		changed:    make(chan struct{}),
	}
	for _, e := range reg.entries {
		st.advertised[e.kv] = true
	}
	return st
}

// send queues a frame on the current stream, if any. Without a stream the frame is
// dropped: kept results are re-sent on the next one, and heartbeats/interest are rebuilt.
func (st *state) send(m *pb.WorkStreamClientMsg) {
	if st.session != nil {
		st.session.push(m)
	}
}

func (st *state) publish() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// outstanding is the number of tracked leases plus kept results.
func (st *state) outstanding() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.running) + st.unacked.len()
}

// waitOutstandingZero blocks until nothing is left to finish or deliver, or ctx ends.
func (st *state) waitOutstandingZero(ctx context.Context) bool {
	for {
		st.mu.Lock()
		n := len(st.running) + st.unacked.len()
		ch := st.changed
		st.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (st *state) counts() (int, int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.running), st.unacked.len()
}

func (st *state) isShuttingDown() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.shuttingDown
}
