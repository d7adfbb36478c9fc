package converge

import (
	"context"
	"encoding/json"
	"fmt"

	pb "converge.dev/sdk-go/gen/workerv1"
)

// sdkName is sent in Subscribe.sdk.
const sdkName = "go/" + Version

// Version is this SDK's version.
const Version = "0.1.0"

// readiness is one poll of a provider's Ready.
type readiness struct {
	kv    KindVersion
	ready bool
}

// openSession installs ob as the one outbox and queues, in order: the Subscribe frame
// (listing every tracked lease and kept result in resumed), Interest{has_worker:false} for
// each pair that is not ready (all of them once shutting down), and every kept result.
func (st *state) openSession(ob *outbox, reg *registry, cfg *Config, ready []readiness) {
	st.mu.Lock()
	defer st.mu.Unlock()
	sub := &pb.Subscribe{
		MaxInflight: uint32(cfg.MaxParallel),
		WorkerName:  cfg.WorkerName,
		Sdk:         sdkName,
		// Compose handlers get ReactionRequest.DryRun() and answer as usual.
		DryRuns: true,
	}
	for _, e := range reg.entries {
		sub.Kinds = append(sub.Kinds, e.kv.Kind)
		sub.KindVersions = append(sub.KindVersions, e.kv.Version)
	}
	for k := range st.running {
		sub.Resumed = append(sub.Resumed, &pb.ResumedTask{LeaseToken: k.token, ClaimEpoch: k.epoch})
	}
	st.unacked.each(func(k leaseKey, _ *pb.StageComplete) {
		sub.Resumed = append(sub.Resumed, &pb.ResumedTask{LeaseToken: k.token, ClaimEpoch: k.epoch})
	})
	st.log.Info("subscribing", "session", ob.id, "kinds", len(reg.entries),
		"resumed", len(sub.Resumed), "unacked", st.unacked.len())
	st.session = ob
	st.send(subscribeFrame(sub))
	for _, r := range ready {
		ok := r.ready && !st.shuttingDown
		st.advertised[r.kv] = ok
		if !ok {
			st.send(interestFrame(r.kv, false))
		}
	}
	st.unacked.each(func(_ leaseKey, c *pb.StageComplete) { st.send(completeFrame(c)) })
}

// closeSession detaches ob if it is still the current outbox.
func (st *state) closeSession(ob *outbox) {
	st.mu.Lock()
	if st.session == ob {
		st.session = nil
	}
	st.mu.Unlock()
	ob.close()
}

// admission is how a task frame was taken in.
type admission int

const (
	admitRun       admission = iota // tracked: run it
	admitDuplicate                  // already running: ignore the frame
	admitResent                     // already finished, waiting for its ack: result re-sent
)

// admit takes in a task frame; with admitRun, the task's context is derived from parent
// and registered so that CancelTask and shutdown can cancel it.
func (st *state) admit(parent context.Context, k leaseKey) (admission, context.Context) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.running[k]; ok {
		return admitDuplicate, nil
	}
	if c, ok := st.unacked.get(k); ok {
		st.send(completeFrame(c))
		return admitResent, nil
	}
	ctx, cancel := context.WithCancelCause(parent)
	st.running[k] = &running{cancel: cancel}
	st.publish()
	return admitRun, ctx
}

// finish records the result of a tracked task: it is kept until acked and sent on the
// current stream. A task no longer tracked (cancelled by the broker) is dropped.
func (st *state) finish(k leaseKey, c *pb.StageComplete) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.running[k]
	if !ok {
		st.log.Debug("result of a cancelled task dropped", "lease", k.token)
		return
	}
	delete(st.running, k)
	r.cancel(nil)
	st.keepAndSend(k, c)
}

// finishUntracked records a result for a task that was never tracked (refused).
func (st *state) finishUntracked(k leaseKey, c *pb.StageComplete) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.keepAndSend(k, c)
}

func (st *state) keepAndSend(k leaseKey, c *pb.StageComplete) {
	st.send(completeFrame(c))
	if old, dropped := st.unacked.push(k, c); dropped {
		st.log.Warn("unacked result buffer full; dropped the oldest result (the broker will re-run it)",
			"lease", old.token, "claim_epoch", old.epoch, "cap", maxUnacked)
	}
	st.publish()
}

// ack handles a CompleteAck: the result is dropped whether or not it was accepted (a
// refused result is stale and must not be retried).
func (st *state) ack(k leaseKey, accepted bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.unacked.remove(k) {
		st.log.Debug("ack for an unknown result", "lease", k.token, "claim_epoch", k.epoch)
		return
	}
	if !accepted {
		st.log.Info("result refused as stale", "lease", k.token, "claim_epoch", k.epoch)
	}
	st.publish()
}

// cancelTask handles a CancelTask: it cancels the handler's context with a
// [CancelledError] naming reason and forgets the lease and any kept result. It reports
// whether the lease was known.
func (st *state) cancelTask(k leaseKey, reason string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, wasRunning := st.running[k]
	if wasRunning {
		delete(st.running, k)
		r.cancel(&CancelledError{Reason: reason})
	}
	hadResult := st.unacked.remove(k)
	st.publish()
	return wasRunning || hadResult
}

// cancelAll cancels every handler and forgets every lease and result (end of shutdown).
func (st *state) cancelAll() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := len(st.running)
	for k, r := range st.running {
		r.cancel(&CancelledError{Reason: CancelShutdown})
		delete(st.running, k)
	}
	st.unacked = newUnacked()
	st.publish()
	return n
}

// heartbeat queues one coalesced heartbeat of every tracked task, if any runs and a
// stream is up; it returns how many tasks it listed.
func (st *state) heartbeat() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.running) == 0 || st.session == nil {
		return 0
	}
	hb := &pb.WorkHeartbeat{
		LeaseToken: make([]string, 0, len(st.running)),
		ClaimEpoch: make([]int64, 0, len(st.running)),
	}
	for k := range st.running {
		hb.LeaseToken = append(hb.LeaseToken, k.token)
		hb.ClaimEpoch = append(hb.ClaimEpoch, k.epoch)
	}
	st.send(heartbeatFrame(hb))
	return len(st.running)
}

// updateReadiness applies a poll of the providers' Ready: each edge becomes an Interest.
func (st *state) updateReadiness(ready []readiness) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.shuttingDown {
		return
	}
	for _, r := range ready {
		prev, known := st.advertised[r.kv]
		st.advertised[r.kv] = r.ready
		if !known || prev != r.ready {
			st.log.Info("provider readiness changed", "kind", r.kv.Kind, "kind_version", r.kv.Version, "ready", r.ready)
			st.send(interestFrame(r.kv, r.ready))
		}
	}
}

// beginShutdown refuses new tasks from now on and tells the broker every pair is unready.
func (st *state) beginShutdown() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.shuttingDown = true
	for kv, ready := range st.advertised {
		if ready {
			st.advertised[kv] = false
			st.send(interestFrame(kv, false))
		}
	}
}

// configFor is the cached default config of a pair.
func (st *state) configFor(kv KindVersion) ProviderConfig {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.configs[kv]
}

// storeConfig caches a pair's default config and reports whether it changed.
func (st *state) storeConfig(kv KindVersion, cfg ProviderConfig) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	prev, had := st.configs[kv]
	st.configs[kv] = cfg
	return !had || string(prev.Spec) != string(cfg.Spec) || string(prev.Bundle) != string(cfg.Bundle)
}

// providerConfig builds a cached config from wire bytes; a malformed spec is logged and
// treated as absent.
func (st *state) providerConfig(kv KindVersion, spec, bundle []byte) ProviderConfig {
	cfg := ProviderConfig{Bundle: bundle}
	if len(spec) > 0 {
		if json.Valid(spec) {
			cfg.Spec = json.RawMessage(spec)
		} else {
			st.log.Warn("provider config is not valid JSON; ignoring its spec", "kind", kv.Kind, "kind_version", kv.Version)
		}
	}
	return cfg
}

// callSafely runs user code, turning a panic into an error.
func callSafely(f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	f()
	return nil
}
