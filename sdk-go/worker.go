package converge

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/keepalive"
)

// Connection liveness: an HTTP/2 PING every keepaliveTime (also with no call open; the
// broker does not limit pings) and the connection dropped when one is not answered within
// keepaliveTimeout, so a dead or black-holed broker is left within about 20 s instead of at
// the TCP timeout. connectTimeout bounds one connect attempt (grpc-go's default is 20 s)
// so a black-holed address fails over in seconds.
const (
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = 10 * time.Second
	connectTimeout   = 5 * time.Second
)

// shutdownCancelGrace is how long cancelled handlers get to return at the end of shutdown.
const shutdownCancelGrace = time.Second

var osLookupEnv = os.LookupEnv

// worker is one running worker: its configuration, providers, shared state and the
// lifetime of its handlers (which outlives any one stream).
type worker struct {
	cfg Config
	reg *registry
	st  *state
	log *slog.Logger
	// targets are the gRPC targets (host:port) of cfg.BrokerAddrs, in the same order.
	targets  []string
	dialOpts []grpc.DialOption
	// sem bounds concurrently running handlers to MaxParallel.
	sem chan struct{}
	// workCtx parents every handler context; cancelled only at the very end of shutdown,
	// so a stream drop never cancels a handler.
	workCtx    context.Context
	workCancel context.CancelFunc
	handlers   sync.WaitGroup
	sessions   uint64
}

// Serve runs a worker until ctx is done, then drains: it stops taking tasks (every kind is
// advertised unready and stragglers are refused as transient failures), waits up to the
// drain timeout for running handlers to finish and their results to be acknowledged, then
// cancels whatever still runs and returns nil. The configuration comes from the
// environment (ConfigFromEnv) unless WithConfig is given. Broker outages are retried
// forever; only an unusable configuration or provider set is an error. Serve never
// installs signal handlers (see RunWorker).
func Serve(ctx context.Context, providers []Provider, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := o.resolve()
	if err != nil {
		return err
	}
	reg, err := newRegistry(providers, cfg.Kinds)
	if err != nil {
		return err
	}
	targets := make([]string, len(cfg.BrokerAddrs))
	for i, a := range cfg.BrokerAddrs {
		if targets[i], err = dialTarget("BrokerAddrs", a); err != nil {
			return err
		}
	}
	log := o.logger
	if log == nil {
		log = slog.Default()
	}
	w := &worker{cfg: cfg, reg: reg, log: log, targets: targets, sem: make(chan struct{}, cfg.MaxParallel)}
	w.st = newState(reg, log)
	w.workCtx, w.workCancel = context.WithCancel(context.Background())
	defer w.workCancel()
	// The transport credentials and the token are added at each dial (transportOptions),
	// before these, so that WithDialOptions can still override them.
	callOpts := []grpc.CallOption{grpc.MaxCallRecvMsgSize(cfg.maxMessageBytes()), grpc.MaxCallSendMsgSize(cfg.maxMessageBytes())}
	if cfg.Compression == CompressionGzip {
		// The broker answers gzip only to a worker that sends it.
		callOpts = append(callOpts, grpc.UseCompressor(gzip.Name))
	}
	w.dialOpts = append([]grpc.DialOption{
		grpc.WithDefaultCallOptions(callOpts...),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true}),
		// One attempt per session (the worker's own failover retries): a short connect
		// deadline, and the channel's backoff capped like the worker's.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: ReconnectCap},
			MinConnectTimeout: connectTimeout,
		}),
	}, o.dialOpts...)
	return w.run(ctx)
}

// RunWorker is Serve with the process's SIGTERM and SIGINT as the shutdown signal, and a
// logger from LOG_LEVEL / LOG_FORMAT unless WithLogger is given.
func RunWorker(providers []Provider, opts ...Option) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log, err := LoggerFromEnv()
	if err != nil {
		return err
	}
	return Serve(ctx, providers, append([]Option{WithLogger(log)}, opts...)...)
}

func (w *worker) run(ctx context.Context) error {
	kinds := make([]string, 0, len(w.reg.entries))
	for _, e := range w.reg.entries {
		kinds = append(kinds, e.kv.String())
	}
	w.log.Info("worker starting", "brokers", w.cfg.BrokerAddrs, "worker", w.cfg.WorkerName,
		"kinds", kinds, "max_parallel", w.cfg.MaxParallel)
	fo := w.prime(ctx)
	if fo == nil {
		w.log.Info("shutdown before the provider configs were loaded")
		return nil
	}

	stopCtx, stop := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	connect := func(ctx context.Context) { w.connectionLoop(ctx, fo) }
	for _, loop := range []func(context.Context){connect, w.heartbeatLoop, w.readinessLoop} {
		loops.Add(1)
		go func() {
			defer loops.Done()
			loop(stopCtx)
		}()
	}

	<-ctx.Done()
	running, unacked := w.st.counts()
	w.log.Info("shutdown requested; draining", "running", running, "unacked", unacked, "drain_timeout", w.cfg.DrainTimeout)
	w.st.beginShutdown()
	dctx, cancel := context.WithTimeout(context.Background(), w.cfg.DrainTimeout)
	drained := w.st.waitOutstandingZero(dctx)
	cancel()
	if !drained {
		running, unacked := w.st.counts()
		w.log.Warn("drain timeout passed; cancelling the remaining handlers", "running", running, "unacked", unacked)
	}
	cancelled := w.st.cancelAll()
	w.workCancel()
	if !waitTimeout(&w.handlers, shutdownCancelGrace) {
		// Go cannot abort a goroutine: handlers that ignore their context are abandoned.
		w.log.Warn("handlers ignored cancellation; abandoning them")
	}
	stop()
	loops.Wait()
	w.log.Info("worker stopped", "cancelled", cancelled)
	return nil
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// heartbeatLoop sends one coalesced heartbeat of the running tasks every HeartbeatEvery.
func (w *worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.HeartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := w.st.heartbeat(); n > 0 {
				w.log.Debug("heartbeat sent", "tasks", n)
			}
		}
	}
}

// readinessLoop polls every provider's Ready every ReadinessPoll; edges become Interest.
func (w *worker) readinessLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.ReadinessPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.st.updateReadiness(w.pollReadiness())
		}
	}
}

// pollReadiness calls every provider's Ready; a panicking probe counts as unready.
func (w *worker) pollReadiness() []readiness {
	out := make([]readiness, 0, len(w.reg.entries))
	for _, e := range w.reg.entries {
		ready := true
		if rr, ok := e.p.(ReadinessReporter); ok {
			if err := callSafely(func() { ready = rr.Ready() }); err != nil {
				w.log.Warn("Ready panicked; treating the provider as unready", "kind", e.kv.Kind, "kind_version", e.kv.Version, "panic", err)
				ready = false
			}
		}
		out = append(out, readiness{kv: e.kv, ready: ready})
	}
	return out
}

// applyConfig caches a pair's default config and calls OnConfig when always or changed.
func (w *worker) applyConfig(e registered, cfg ProviderConfig, always bool) {
	changed := w.st.storeConfig(e.kv, cfg)
	if !always && !changed {
		return
	}
	w.log.Debug("provider config applied", "kind", e.kv.Kind, "kind_version", e.kv.Version, "empty", cfg.IsEmpty())
	if cr, ok := e.p.(ConfigReceiver); ok {
		if err := callSafely(func() { cr.OnConfig(cfg) }); err != nil {
			w.log.Warn("OnConfig panicked", "kind", e.kv.Kind, "kind_version", e.kv.Version, "panic", err)
		}
	}
}
