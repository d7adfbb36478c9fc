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

// dial opens a fresh connection per session, so that after a drain a load balancer can
// route the next one to another broker. The token file and TLS files are read here, at
// every connect; an unreadable one is an error retried like an unreachable broker.
func (w *worker) dial() (*grpc.ClientConn, error) {
	opts, err := w.cfg.transportOptions()
	if err != nil {
		return nil, err
	}
	return grpc.NewClient(w.target, append(opts, w.dialOpts...)...)
}

// pullConfigs makes one GetProviderConfig call for every registered pair.
func (w *worker) pullConfigs(ctx context.Context, client pb.WorkerServiceClient) ([]*pb.ProviderConfigEntry, error) {
	req := &pb.GetProviderConfigRequest{}
	for _, e := range w.reg.entries {
		req.Kinds = append(req.Kinds, e.kv.Kind)
		req.KindVersions = append(req.KindVersions, e.kv.Version)
	}
	ctx, cancel := context.WithTimeout(ctx, configPullTimeout)
	defer cancel()
	resp, err := client.GetProviderConfig(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.GetEntries(), nil
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

// prime loads every registered pair's default config, retrying with jittered backoff
// until the broker answers, and fires OnConfig for each before any task can arrive. It
// returns false if ctx ends first.
func (w *worker) prime(ctx context.Context) bool {
	bo := newBackoff(w.cfg.ReconnectMin, w.cfg.ReconnectMax)
	for {
		entries, err := w.pullOnce(ctx)
		if err == nil {
			w.log.Info("provider configs loaded", "configs", len(entries))
			w.applyPulled(entries, true)
			return true
		}
		d := bo.next()
		w.log.Warn("cannot load provider configs; retrying", "error", err, "retry_in", d, "broker", w.cfg.BrokerAddr)
		if !sleepCtx(ctx, d) {
			return false
		}
	}
}

func (w *worker) pullOnce(ctx context.Context) ([]*pb.ProviderConfigEntry, error) {
	conn, err := w.dial()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return w.pullConfigs(ctx, pb.NewWorkerServiceClient(conn))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// connectionLoop runs sessions until ctx ends, reconnecting with exponential backoff
// (reset after a session that outlived the current backoff). Handlers keep running across
// reconnects.
func (w *worker) connectionLoop(ctx context.Context) {
	bo := newBackoff(w.cfg.ReconnectMin, w.cfg.ReconnectMax)
	reconnect := false
	for {
		started := time.Now()
		drained, err := w.session(ctx, reconnect)
		if ctx.Err() != nil {
			return
		}
		reconnect = true
		switch {
		case err != nil:
			w.log.Warn("work stream lost", "error", err, "broker", w.cfg.BrokerAddr)
		case drained:
			w.log.Info("session drained")
		default:
			w.log.Warn("broker closed the work stream")
		}
		if time.Since(started) > bo.current {
			bo.reset()
		}
		d := bo.next()
		w.log.Info("reconnecting", "retry_in", d)
		if !sleepCtx(ctx, d) {
			return
		}
	}
}

// session runs one WorkStream: it reports drained=true when the broker asked to drain and
// everything in flight was delivered, and (false, nil) when the broker closed the stream.
func (w *worker) session(ctx context.Context, reconnect bool) (drained bool, err error) {
	conn, err := w.dial()
	if err != nil {
		return false, err
	}
	defer conn.Close()
	client := pb.NewWorkerServiceClient(conn)
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
		return false, err
	}
	w.log.Info("work stream open", "session", ob.id)

	sendErr := make(chan error, 1)
	go sendLoop(streamCtx, stream, ob, sendErr)
	inbound := make(chan *pb.WorkStreamServerMsg)
	recvErr := make(chan error, 1)
	go func() {
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

	var delivered chan struct{} // non-nil once draining: closed when nothing is outstanding
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case <-delivered:
			w.log.Info("drained: in-flight work delivered; closing the stream", "session", ob.id)
			return true, nil
		case err := <-sendErr:
			return false, err
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return false, nil
			}
			return false, err
		case m := <-inbound:
			if d := w.handle(m, ob.id, delivered != nil); d && delivered == nil {
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

// handle processes one broker frame; it returns true for a Drain.
func (w *worker) handle(m *pb.WorkStreamServerMsg, session uint64, draining bool) bool {
	switch b := m.GetBody().(type) {
	case *pb.WorkStreamServerMsg_Task:
		refuse := ""
		if draining {
			refuse = "worker stream is draining; task refused"
		} else if w.st.isShuttingDown() {
			refuse = "worker is shutting down; task refused"
		}
		w.accept(b.Task, refuse)
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
		known := w.st.cancelTask(k)
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
