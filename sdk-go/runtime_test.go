package converge

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "converge.dev/sdk-go/gen/workerv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// fakeBroker is a scripted WorkerService: each WorkStream is handed to the test as a
// brokerStream so the test can read the worker's frames and answer them.
type fakeBroker struct {
	pb.UnimplementedWorkerServiceServer
	streams chan *brokerStream
	configs []*pb.ProviderConfigEntry
	pulls   atomic.Int32
	mu      sync.Mutex
	calls   []string // "<rpc> <authorization metadata>" of every call, in arrival order
	// ListDescendants serves subtree (page tokens are offsets), or fails with listErr;
	// lists records every request it got.
	subtree []*pb.Resource
	listErr error
	lists   []*pb.ListDescendantsRequest
}

// serveSubtree scripts what ListDescendants answers: the rows, or err for every call.
func (f *fakeBroker) serveSubtree(rows []*pb.Resource, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subtree, f.listErr = rows, err
}

// listCalls is every ListDescendants request so far.
func (f *fakeBroker) listCalls() []*pb.ListDescendantsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.ListDescendantsRequest(nil), f.lists...)
}

func (f *fakeBroker) ListDescendants(ctx context.Context, req *pb.ListDescendantsRequest) (*pb.ListDescendantsResponse, error) {
	f.record(ctx, "ListDescendants")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, req)
	if f.listErr != nil {
		return nil, f.listErr
	}
	start := 0
	if len(req.GetPageToken()) > 0 {
		n, err := strconv.Atoi(string(req.GetPageToken()))
		if err != nil || n < 0 || n > len(f.subtree) {
			return nil, status.Errorf(codes.InvalidArgument, "bad page token %q", req.GetPageToken())
		}
		start = n
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = DefaultPageSize
	}
	end := min(start+size, len(f.subtree))
	resp := &pb.ListDescendantsResponse{Descendants: f.subtree[start:end]}
	if end < len(f.subtree) {
		resp.NextPageToken = []byte(strconv.Itoa(end))
	}
	return resp, nil
}

func (f *fakeBroker) record(ctx context.Context, rpc string) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, rpc+" "+strings.Join(md.Get("authorization"), ","))
}

func (f *fakeBroker) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

type brokerStream struct {
	in   chan *pb.WorkStreamClientMsg
	out  chan *pb.WorkStreamServerMsg
	done chan struct{} // close to end the stream from the broker side
}

func (f *fakeBroker) GetProviderConfig(ctx context.Context, _ *pb.GetProviderConfigRequest) (*pb.GetProviderConfigResponse, error) {
	f.record(ctx, "GetProviderConfig")
	f.pulls.Add(1)
	return &pb.GetProviderConfigResponse{Entries: f.configs}, nil
}

func (f *fakeBroker) WorkStream(s grpc.BidiStreamingServer[pb.WorkStreamClientMsg, pb.WorkStreamServerMsg]) error {
	f.record(s.Context(), "WorkStream")
	bs := &brokerStream{in: make(chan *pb.WorkStreamClientMsg, 100), out: make(chan *pb.WorkStreamServerMsg, 100), done: make(chan struct{})}
	f.streams <- bs
	go func() {
		for {
			m, err := s.Recv()
			if err != nil {
				close(bs.in)
				return
			}
			bs.in <- m
		}
	}()
	for {
		select {
		case m := <-bs.out:
			if err := s.Send(m); err != nil {
				return err
			}
		case <-bs.done:
			return nil
		case <-s.Context().Done():
			return nil
		}
	}
}

func startFakeBroker(t *testing.T, configs ...*pb.ProviderConfigEntry) (*fakeBroker, string) {
	t.Helper()
	return startFakeBrokerWith(t, nil, configs...)
}

// startFakeBrokerWith starts the fake broker with these server options (e.g. TLS).
func startFakeBrokerWith(t *testing.T, opts []grpc.ServerOption, configs ...*pb.ProviderConfigEntry) (*fakeBroker, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBroker{streams: make(chan *brokerStream, 10), configs: configs}
	srv := grpc.NewServer(opts...)
	pb.RegisterWorkerServiceServer(srv, fb)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return fb, l.Addr().String()
}

const wait = 10 * time.Second

func (f *fakeBroker) nextStream(t *testing.T) *brokerStream {
	t.Helper()
	select {
	case s := <-f.streams:
		return s
	case <-time.After(wait):
		t.Fatal("the worker did not open a stream")
		return nil
	}
}

// recv returns the next frame that is not a heartbeat (unless wanted).
func (s *brokerStream) recv(t *testing.T, heartbeats bool) *pb.WorkStreamClientMsg {
	t.Helper()
	for {
		select {
		case m, ok := <-s.in:
			if !ok {
				t.Fatal("the worker closed the stream")
			}
			if m.GetHeartbeat() != nil && !heartbeats {
				continue
			}
			return m
		case <-time.After(wait):
			t.Fatal("no frame from the worker")
			return nil
		}
	}
}

func (s *brokerStream) send(m *pb.WorkStreamServerMsg) { s.out <- m }

func task(lease string, epoch int64, kind string, deadlineMs int64) *pb.WorkStreamServerMsg {
	return &pb.WorkStreamServerMsg{Body: &pb.WorkStreamServerMsg_Task{Task: &pb.StageTask{
		Stage: StageWork, Kind: kind, KindVersion: 1, Reaction: "work", LeaseToken: lease, ClaimEpoch: epoch,
		Generation: 1, Attempt: 1, TaskDeadlineMs: deadlineMs,
		Request: &pb.StageTask_WorkReq{WorkReq: &pb.WorkRequest{Resource: &pb.Resource{Kind: kind, Name: lease}}},
	}}}
}

func ackMsg(lease string, epoch int64, accepted bool) *pb.WorkStreamServerMsg {
	return &pb.WorkStreamServerMsg{Body: &pb.WorkStreamServerMsg_Ack{Ack: &pb.CompleteAck{LeaseToken: lease, ClaimEpoch: epoch, Accepted: accepted}}}
}

// serveFake runs Serve against the fake broker with fast timings until the test ends.
func serveFake(t *testing.T, addr string, providers []Provider, opts ...Option) context.CancelFunc {
	cfg := NewConfig(addr)
	cfg.ReconnectMin, cfg.ReconnectMax = 20*time.Millisecond, 100*time.Millisecond
	cfg.HeartbeatEvery = 50 * time.Millisecond
	cfg.ReadinessPoll = 50 * time.Millisecond
	cfg.DrainTimeout = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, providers, append([]Option{WithConfig(cfg), WithLogger(quietLog())}, opts...)...)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(wait):
			t.Error("Serve did not return")
		}
	})
	return cancel
}

// blocker runs until its context ends, reporting each start and what ended it (the
// context's cause).
type blocker struct {
	kind    string
	started chan string
	ended   chan error
	release chan struct{}
}

func newBlocker(kind string) *blocker {
	return &blocker{kind: kind, started: make(chan string, 10), ended: make(chan error, 10), release: make(chan struct{})}
}

func (b *blocker) Kind() KindVersion { return KindVersion{b.kind, 1} }

func (b *blocker) Work(ctx context.Context, req *ReactionRequest) (*Outcome, error) {
	b.started <- req.Resource.Name
	select {
	case <-ctx.Done():
		b.ended <- context.Cause(ctx)
		return nil, ctx.Err()
	case <-b.release:
		b.ended <- nil
		return StatusOutcome(map[string]any{"name": req.Resource.Name}), nil
	}
}

func TestStreamResendsUnackedResultsAfterAReconnect(t *testing.T) {
	fb, addr := startFakeBroker(t)
	echoP := ProviderFunc(KindVersion{"k", 1}, func(_ context.Context, req *ReactionRequest) (*Outcome, error) {
		return StatusOutcome(map[string]any{"name": req.Resource.Name}), nil
	})
	serveFake(t, addr, []Provider{echoP}, WithWorkerName("w-test"))

	s1 := fb.nextStream(t)
	sub := s1.recv(t, false).GetSubscribe()
	if sub == nil || sub.WorkerName != "w-test" || sub.Sdk != "go/"+Version || sub.Kinds[0] != "k" || len(sub.Resumed) != 0 || !sub.DryRuns {
		t.Fatalf("first frame: %v", sub)
	}
	s1.send(task("t1", 5, "k", 0))
	c := s1.recv(t, false).GetComplete()
	if c.GetLeaseToken() != "t1" || c.GetClaimEpoch() != 5 || c.GetStage() != StageWork || string(c.GetStatus()) != `{"name":"t1"}` {
		t.Fatalf("complete: %v", c)
	}
	close(s1.done) // the stream ends before the ack

	s2 := fb.nextStream(t)
	sub = s2.recv(t, false).GetSubscribe()
	if len(sub.GetResumed()) != 1 || sub.Resumed[0].LeaseToken != "t1" || sub.Resumed[0].ClaimEpoch != 5 {
		t.Fatalf("Subscribe.resumed after reconnect: %v", sub)
	}
	if c := s2.recv(t, false).GetComplete(); c.GetLeaseToken() != "t1" {
		t.Fatalf("the unacked result must be re-sent, got %v", c)
	}
	if fb.pulls.Load() < 2 {
		t.Fatal("configs must be re-pulled after a reconnect")
	}
	s2.send(ackMsg("t1", 5, true))
	close(s2.done)
	s3 := fb.nextStream(t)
	if sub := s3.recv(t, false).GetSubscribe(); len(sub.GetResumed()) != 0 {
		t.Fatalf("an acked result must not be resumed: %v", sub)
	}
}

func TestCancelTaskAndDeadlineCancelTheHandler(t *testing.T) {
	fb, addr := startFakeBroker(t)
	b := newBlocker("k")
	serveFake(t, addr, []Provider{b})
	s := fb.nextStream(t)
	s.recv(t, false) // Subscribe

	s.send(task("c1", 1, "k", 0))
	<-b.started
	// The running task shows up in a heartbeat.
	for {
		if hb := s.recv(t, true).GetHeartbeat(); hb != nil && len(hb.LeaseToken) == 1 && hb.LeaseToken[0] == "c1" {
			break
		}
	}
	s.send(&pb.WorkStreamServerMsg{Body: &pb.WorkStreamServerMsg_Cancel{Cancel: &pb.CancelTask{LeaseToken: "c1", ClaimEpoch: 1, Reason: "deleted"}}})
	var ce *CancelledError
	if err := <-b.ended; !errors.As(err, &ce) || ce.Reason != CancelDeleted || !errors.Is(err, context.Canceled) {
		t.Fatalf("CancelTask must cancel the handler's context with the broker's reason, got %v", err)
	}

	s.send(task("d1", 1, "k", 50))
	<-b.started
	c := s.recv(t, false).GetComplete()
	if c.GetLeaseToken() != "d1" || c.GetErrorMessage() != "deadline exceeded" || c.GetTerminal() {
		t.Fatalf("want a transient deadline failure for d1 (and nothing for c1), got %v", c)
	}
	if err := <-b.ended; !errors.As(err, &ce) || ce.Reason != CancelDeadline || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the deadline must cancel the handler's context (reason deadline), got %v", err)
	}
}

func TestDrainFinishesInFlightRefusesNewWorkAndReconnects(t *testing.T) {
	fb, addr := startFakeBroker(t)
	b := newBlocker("k")
	serveFake(t, addr, []Provider{b})
	s := fb.nextStream(t)
	s.recv(t, false)
	s.send(task("r1", 1, "k", 0))
	<-b.started
	s.send(&pb.WorkStreamServerMsg{Body: &pb.WorkStreamServerMsg_Drain{Drain: &pb.Drain{Reason: "shutdown"}}})
	s.send(task("r2", 1, "k", 0))
	c := s.recv(t, false).GetComplete()
	if c.GetLeaseToken() != "r2" || c.GetErrorMessage() == "" || c.GetTerminal() {
		t.Fatalf("a task after Drain must be refused transiently: %v", c)
	}
	close(b.release)
	if c := s.recv(t, false).GetComplete(); c.GetLeaseToken() != "r1" || c.GetErrorMessage() != "" {
		t.Fatalf("the in-flight task must finish: %v", c)
	}
	s.send(ackMsg("r2", 1, true))
	s.send(ackMsg("r1", 1, false))
	// Everything delivered: the worker ends this stream and opens a new one.
	if sub := fb.nextStream(t).recv(t, false).GetSubscribe(); sub == nil || len(sub.Resumed) != 0 {
		t.Fatalf("after a drain the worker reconnects with nothing to resume: %v", sub)
	}
}

// gated is ready unless its config says {"ready": false}.
type gated struct {
	ready   atomic.Bool
	configs chan ProviderConfig
}

func (*gated) Kind() KindVersion { return KindVersion{"g", 1} }
func (g *gated) Ready() bool     { return g.ready.Load() }
func (g *gated) OnConfig(c ProviderConfig) {
	g.ready.Store(string(c.Spec) != `{"ready":false}`)
	g.configs <- c
}
func (*gated) Work(context.Context, *ReactionRequest) (*Outcome, error) { return nil, nil }

func TestConfigPrimeAndPushDriveReadinessInterest(t *testing.T) {
	fb, addr := startFakeBroker(t, &pb.ProviderConfigEntry{Kind: "g", KindVersion: 1, Config: []byte(`{"ready":false}`), Bundle: []byte("B")})
	g := &gated{configs: make(chan ProviderConfig, 10)}
	serveFake(t, addr, []Provider{g})
	if c := <-g.configs; string(c.Spec) != `{"ready":false}` || string(c.Bundle) != "B" {
		t.Fatalf("primed config: %+v", c)
	}
	s := fb.nextStream(t)
	s.recv(t, false)
	if in := s.recv(t, false).GetInterest(); in.GetKind() != "g" || in.GetHasWorker() || in.GetKindVersion() != 1 {
		t.Fatalf("an unready kind must be announced after Subscribe: %v", in)
	}
	s.send(&pb.WorkStreamServerMsg{Body: &pb.WorkStreamServerMsg_Config{Config: &pb.ProviderConfigUpdate{Kind: "g", KindVersion: 1, Config: []byte(`{"ready":true}`)}}})
	<-g.configs
	if in := s.recv(t, false).GetInterest(); !in.GetHasWorker() {
		t.Fatalf("a config push that makes the kind ready must flip it on: %v", in)
	}
}

func TestUnknownKindAndPanicsAreReportedNotFatal(t *testing.T) {
	fb, addr := startFakeBroker(t)
	p := ProviderFunc(KindVersion{"k", 1}, func(context.Context, *ReactionRequest) (*Outcome, error) { panic("kaboom") })
	serveFake(t, addr, []Provider{p})
	s := fb.nextStream(t)
	s.recv(t, false)
	s.send(task("u1", 1, "nope", 0))
	if c := s.recv(t, false).GetComplete(); !c.GetTerminal() || c.GetLeaseToken() != "u1" {
		t.Fatalf("no handler must be terminal: %v", c)
	}
	s.send(task("p1", 1, "k", 0))
	if c := s.recv(t, false).GetComplete(); c.GetTerminal() || c.GetErrorMessage() != "handler panicked: kaboom" {
		t.Fatalf("a panic must be a transient failure with its message: %v", c)
	}
}

func TestMaxParallelBoundsRunningHandlers(t *testing.T) {
	fb, addr := startFakeBroker(t)
	b := newBlocker("k")
	serveFake(t, addr, []Provider{b}, WithMaxParallel(2))
	s := fb.nextStream(t)
	if sub := s.recv(t, false).GetSubscribe(); sub.MaxInflight != 2 {
		t.Fatalf("max_inflight %d", sub.MaxInflight)
	}
	for _, l := range []string{"a", "b", "c"} {
		s.send(task(l, 1, "k", 0))
	}
	<-b.started
	<-b.started
	select {
	case n := <-b.started:
		t.Fatalf("a third handler (%s) started beyond MaxParallel", n)
	case <-time.After(100 * time.Millisecond):
	}
	close(b.release)
	<-b.started // the third runs once a permit frees
}
