package converge

import (
	"sync"

	pb "converge.dev/sdk-go/gen/workerv1"
)

// outbox is one session's unbounded frame queue. Producers (the shared state, under its
// lock) never block on the network; the session's single sender goroutine drains it in
// order onto the gRPC stream, which is the only goroutine that calls Send.
type outbox struct {
	id     uint64
	mu     sync.Mutex
	frames []*pb.WorkStreamClientMsg
	closed bool
	wake   chan struct{} // capacity 1: "there may be frames"
}

func newOutbox(id uint64) *outbox {
	return &outbox{id: id, wake: make(chan struct{}, 1)}
}

func (o *outbox) push(m *pb.WorkStreamClientMsg) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.frames = append(o.frames, m)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take returns every queued frame; ok is false once the outbox is closed and empty.
func (o *outbox) take() (frames []*pb.WorkStreamClientMsg, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	frames, o.frames = o.frames, nil
	return frames, len(frames) > 0 || !o.closed
}

func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// frame builders keep call sites short.
func subscribeFrame(s *pb.Subscribe) *pb.WorkStreamClientMsg {
	return &pb.WorkStreamClientMsg{Body: &pb.WorkStreamClientMsg_Subscribe{Subscribe: s}}
}

func completeFrame(c *pb.StageComplete) *pb.WorkStreamClientMsg {
	return &pb.WorkStreamClientMsg{Body: &pb.WorkStreamClientMsg_Complete{Complete: c}}
}

func interestFrame(kv KindVersion, hasWorker bool) *pb.WorkStreamClientMsg {
	return &pb.WorkStreamClientMsg{Body: &pb.WorkStreamClientMsg_Interest{
		Interest: &pb.Interest{Kind: kv.Kind, HasWorker: hasWorker, KindVersion: kv.Version},
	}}
}

func heartbeatFrame(h *pb.WorkHeartbeat) *pb.WorkStreamClientMsg {
	return &pb.WorkStreamClientMsg{Body: &pb.WorkStreamClientMsg_Heartbeat{Heartbeat: h}}
}
