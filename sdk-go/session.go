package converge

import (
	"context"
	"errors"
	"io"
	"time"

	pb "converge.dev/sdk-go/gen/workerv1"
	"google.golang.org/grpc"
)

// configPullTimeout bounds one GetProviderConfig call.
const configPullTimeout = 10 * time.Second

// dial opens a fresh connection per session to broker i of the list, so that after a drain
// a load balancer (or the next entry) can give the next one another broker. The TLS server
// name is that entry's host; a host name with several DNS records is tried record by
// record (grpc.NewClient's dns resolver and pick_first). The token file and TLS files are
// read here, at every connect; an unreadable one is an error retried like an unreachable
// broker.
func (w *worker) dial(i int) (*grpc.ClientConn, error) {
	opts, err := w.cfg.transportOptions(w.cfg.BrokerAddrs[i])
	if err != nil {
		return nil, err
	}
	return grpc.NewClient(w.targets[i], append(opts, w.dialOpts...)...)
}

// pullConfigs makes one GetProviderConfig call per registered pair: one call for all of them
// would put every pair's bundle into one answer, which many kinds sharing a large WASM
// component push past the message cap (the worker would never start). Per pair, an answer
// carries at most one bundle.
func (w *worker) pullConfigs(ctx context.Context, client pb.WorkerServiceClient) ([]*pb.ProviderConfigEntry, error) {
	var entries []*pb.ProviderConfigEntry
	for _, e := range w.reg.entries {
		req := &pb.GetProviderConfigRequest{Kinds: []string{e.kv.Kind}, KindVersions: []int32{e.kv.Version}}
		resp, err := w.pullOne(ctx, client, req)
		if err != nil {
			return nil, err
		}
		entries = append(entries, resp.GetEntries()...)
	}
	return entries, nil
}

// pullOne is one GetProviderConfig call under its own timeout.
func (w *worker) pullOne(ctx context.Context, client pb.WorkerServiceClient, req *pb.GetProviderConfigRequest) (*pb.GetProviderConfigResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, configPullTimeout)
	defer cancel()
	return client.GetProviderConfig(ctx, req)
}

// applyPulled applies a pulled set of default configs to every registered pair (pairs
// without an entry have none).
func (w *worker) applyPulled(entries []*pb.ProviderConfigEntry, always bool) {
	byKV := make(map[KindVersion]*pb.ProviderConfigEntry, len(entries))
	for _, e := range entries {
		byKV[KindVersion{Kind: e.GetKind(), Version: wireVersion(e.GetKindVersion())}] = e
	}
	for _, reg := range w.reg.entries {
		var cfg ProviderConfig
		if e, ok := byKV[reg.kv]; ok {
			cfg = w.st.providerConfig(reg.kv, e.GetConfig(), e.GetBundle())
		}
		w.applyConfig(reg, cfg, always)
	}
}

// prime loads every registered pair's default config from the first broker of the list
// that answers (retrying along the list with jittered backoff until one does), and fires
// OnConfig for each before any task can arrive. It returns the failover position, on the
// broker that answered, for the connection loop to start from; nil if ctx ends first.
func (w *worker) prime(ctx context.Context) *failover {
	addrs := w.cfg.BrokerAddrs
	fo := newFailover(len(addrs), w.cfg.ReconnectMin, w.cfg.ReconnectMax)
	for {
		addr := addrs[fo.current]
		entries, err := w.pullOnce(ctx, fo.current)
		if err == nil {
			w.log.Info("provider configs loaded", "configs", len(entries), "broker", addr)
			w.applyPulled(entries, true)
			fo.succeeded()
			return fo
		}
		if ctx.Err() != nil {
			return nil
		}
		d := fo.failed()
		w.log.Warn("cannot load provider configs; retrying", "error", err, "broker", addr,
			"next", addrs[fo.current], "retry_in", d)
		if !sleepCtx(ctx, d) {
			return nil
		}
	}
}

func (w *worker) pullOnce(ctx context.Context, i int) ([]*pb.ProviderConfigEntry, error) {
	conn, err := w.dial(i)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return w.pullConfigs(ctx, pb.NewWorkerServiceClient(conn))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// connectionLoop runs sessions until ctx ends, starting on the broker fo points at and
// moving along the list on every failure or stream end (see failover.go for the waits and
// the backoff). Handlers keep running across reconnects.
func (w *worker) connectionLoop(ctx context.Context, fo *failover) {
	addrs := w.cfg.BrokerAddrs
	reconnect := false
	for {
		i := fo.current
		started := time.Now()
		opened, drained, err := w.session(ctx, i, reconnect)
		if ctx.Err() != nil {
			return
		}
		reconnect = true
		switch {
		case err != nil && opened:
			w.log.Warn("work stream lost", "error", err, "broker", addrs[i])
		case err != nil:
			w.log.Warn("no work stream", "error", err, "broker", addrs[i])
		case drained:
			w.log.Info("session drained", "broker", addrs[i])
		default:
			w.log.Warn("broker closed the work stream", "broker", addrs[i])
		}
		var d time.Duration
		if opened {
			d = fo.ended(time.Since(started))
		} else {
			d = fo.failed()
		}
		w.log.Info("reconnecting", "broker", addrs[fo.current], "retry_in", d)
		if !sleepCtx(ctx, d) {
			return
		}
	}
}

// session runs one WorkStream on broker i. opened reports whether the broker took the
// Subscribe (answered with headers); drained=true when the broker asked to drain and
// everything in flight was delivered, and (opened, false, nil) when the broker closed the
// stream.
func (w *worker) session(ctx context.Context, i int, reconnect bool) (opened, drained bool, err error) {
	cc, err := w.dial(i)
	if err != nil {
		return false, false, err
	}
	// Shared with the session's ROLLUP tasks (their paged reads), closed after the last.
	conn := newBrokerConn(cc)
	defer conn.release()
	client := conn.client
	if reconnect {
		// Pulled before the stream opens, so the broker's own push at subscribe time
		// (newer) is applied after it.
		if entries, err := w.pullConfigs(ctx, client); err == nil {
			w.applyPulled(entries, false)
		} else {
			w.log.Warn("config re-pull after reconnect failed", "error", err)
		}
	}
	w.sessions++
	ob := newOutbox(w.sessions)
	w.st.openSession(ob, w.reg, &w.cfg, w.pollReadiness())
	defer w.st.closeSession(ob)

	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.WorkStream(streamCtx)
	if err != nil {
		return false, false, err
	}

	sendErr := make(chan error, 1)
	go sendLoop(streamCtx, stream, ob, sendErr)
	// Closed once the broker answers the stream with headers, which it does after taking
	// the Subscribe; a refusal ends the stream without any (Header returns nil).
	headers := make(chan struct{})
	inbound := make(chan *pb.WorkStreamServerMsg)
	recvErr := make(chan error, 1)
	go func() {
		if md, _ := stream.Header(); md != nil {
			close(headers)
		}
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case inbound <- m:
			case <-streamCtx.Done():
				return
			}
		}
	}()
	isOpen := func() bool {
		select {
		case <-headers:
			return true
		default:
			return false
		}
	}
	announce := headers // set to nil once "work stream open" is logged

	var delivered chan struct{} // non-nil once draining: closed when nothing is outstanding
	for {
		select {
		case <-ctx.Done():
			return isOpen(), false, nil
		case <-announce:
			w.log.Info("work stream open", "session", ob.id, "broker", w.cfg.BrokerAddrs[i])
			announce = nil
		case <-delivered:
			w.log.Info("drained: in-flight work delivered; closing the stream", "session", ob.id)
			return true, true, nil
		case err := <-sendErr:
			return isOpen(), false, err
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return isOpen(), false, nil
			}
			return isOpen(), false, err
		case m := <-inbound:
			if d := w.handle(m, conn, ob.id, delivered != nil); d && delivered == nil {
				delivered = make(chan struct{})
				go func(ch chan struct{}) {
					if w.st.waitOutstandingZero(streamCtx) {
						close(ch)
					}
				}(delivered)
			}
		}
	}
}

// handle processes one broker frame that arrived on conn; it returns true for a Drain.
func (w *worker) handle(m *pb.WorkStreamServerMsg, conn *brokerConn, session uint64, draining bool) bool {
	switch b := m.GetBody().(type) {
	case *pb.WorkStreamServerMsg_Task:
		refuse := ""
		if draining {
			refuse = "worker stream is draining; task refused"
		} else if w.st.isShuttingDown() {
			refuse = "worker is shutting down; task refused"
		}
		w.accept(b.Task, refuse, conn)
	case *pb.WorkStreamServerMsg_Config:
		u := b.Config
		kv := KindVersion{Kind: u.GetKind(), Version: wireVersion(u.GetKindVersion())}
		reg, ok := w.reg.find(kv)
		if !ok {
			w.log.Debug("config for an unserved pair ignored", "kind", kv.Kind, "kind_version", kv.Version)
			return false
		}
		w.applyConfig(reg, w.st.providerConfig(kv, u.GetConfig(), u.GetBundle()), true)
		// Readiness often follows config: re-evaluate at once instead of at the next poll.
		w.st.updateReadiness(w.pollReadiness())
	case *pb.WorkStreamServerMsg_Ack:
		a := b.Ack
		w.st.ack(leaseKey{token: a.GetLeaseToken(), epoch: a.GetClaimEpoch()}, a.GetAccepted())
	case *pb.WorkStreamServerMsg_Cancel:
		c := b.Cancel
		k := leaseKey{token: c.GetLeaseToken(), epoch: c.GetClaimEpoch()}
		known := w.st.cancelTask(k, c.GetReason())
		w.log.Info("task cancelled by the broker", "lease", k.token, "claim_epoch", k.epoch, "reason", c.GetReason(), "known", known)
	case *pb.WorkStreamServerMsg_Drain:
		running, unacked := w.st.counts()
		w.log.Info("broker is draining; finishing in-flight work before reconnecting",
			"session", session, "reason", b.Drain.GetReason(), "running", running, "unacked", unacked)
		return true
	default:
		w.log.Debug("empty frame ignored")
	}
	return false
}

// sendLoop is the session's one sender: it drains the outbox onto the stream in order.
func sendLoop(ctx context.Context, stream grpc.BidiStreamingClient[pb.WorkStreamClientMsg, pb.WorkStreamServerMsg], ob *outbox, done chan<- error) {
	for {
		frames, ok := ob.take()
		for _, f := range frames {
			if err := stream.Send(f); err != nil {
				done <- err
				return
			}
		}
		if !ok {
			_ = stream.CloseSend()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ob.wake:
		}
	}
}
