package converge

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	pb "converge.dev/sdk-go/gen/workerv1"
)

// accept takes in a task frame that arrived on conn. A non-empty refuse (draining or
// shutting down) answers it with a transient failure instead of running it. A ROLLUP task
// holds conn until it finishes, for its paged reads.
func (w *worker) accept(t *pb.StageTask, refuse string, conn *brokerConn) {
	echo := echoOf(t)
	k := echo.key()
	if refuse != "" {
		w.log.Debug("task refused", "lease", k.token, "reason", refuse)
		w.st.finishUntracked(k, failComplete(echo, refuse, false))
		return
	}
	adm, taskCtx := w.st.admit(w.workCtx, k)
	switch adm {
	case admitDuplicate:
		w.log.Debug("duplicate task ignored; it is already running", "lease", k.token)
		return
	case admitResent:
		w.log.Debug("duplicate task; its kept result was re-sent", "lease", k.token)
		return
	}
	var held *brokerConn
	if t.GetStage() == StageRollup && conn != nil && conn.hold() {
		held = conn
	}
	// Each task runs on its own goroutine owned by the worker, not the stream, so a stream
	// drop never cancels a handler; only CancelTask, the deadline or shutdown does.
	go w.runTask(taskCtx, k, echo, t, held)
}

// runTask resolves the provider, decodes the request, waits for a concurrency permit and
// runs the handler under the task deadline, then records the result. conn, when not nil,
// is a reference held for the task (released here): by the time runTask returns the
// handler has returned or its context is done, so its paged reads are over.
func (w *worker) runTask(taskCtx context.Context, k leaseKey, echo taskEcho, t *pb.StageTask, conn *brokerConn) {
	if conn != nil {
		defer conn.release()
	}
	var deadline time.Time
	if ms := t.GetTaskDeadlineMs(); ms > 0 {
		deadline = time.Now().Add(time.Duration(ms) * time.Millisecond)
	}
	kv := KindVersion{Kind: t.GetKind(), Version: wireVersion(t.GetKindVersion())}
	reg, ok := w.reg.find(kv)
	if !ok {
		w.st.finish(k, failComplete(echo, fmt.Sprintf("no provider for %s on this worker", kv), true))
		return
	}
	req, err := requestFromTask(t, w.st.configFor(kv), deadline, conn)
	if err != nil {
		w.st.finish(k, failComplete(echo, err.Error(), true))
		return
	}
	handlerCtx, cancelHandler := taskCtx, context.CancelFunc(func() {})
	if !deadline.IsZero() {
		handlerCtx, cancelHandler = context.WithDeadlineCause(taskCtx, deadline, &CancelledError{Reason: CancelDeadline})
	}
	defer cancelHandler()

	select {
	case w.sem <- struct{}{}:
	case <-handlerCtx.Done():
		if taskCtx.Err() == nil {
			w.st.finish(k, failComplete(echo, "deadline exceeded before the handler started", false))
		}
		return
	}

	done := make(chan *pb.StageComplete, 1)
	w.handlers.Add(1)
	go func() {
		// The permit is held until the handler really returns, so MaxParallel stays true
		// even for a handler that overruns its deadline.
		defer func() { <-w.sem }()
		defer w.handlers.Done()
		done <- callHandler(handlerCtx, w.log, reg.p, req, echo)
	}()

	select {
	case c := <-done:
		if deadlineHit(c, taskCtx, handlerCtx) {
			c = failComplete(echo, "deadline exceeded", false)
		}
		w.st.finish(k, c)
	case <-handlerCtx.Done():
		select {
		case c := <-done: // it returned just in time: its own result wins
			if !deadlineHit(c, taskCtx, handlerCtx) {
				w.st.finish(k, c)
				return
			}
		default:
		}
		if taskCtx.Err() != nil {
			// CancelTask or the end of shutdown: the result would be refused.
			w.log.Debug("task cancelled; its result will not be sent", "lease", k.token)
			return
		}
		w.log.Warn("task deadline exceeded; the handler was cancelled", "lease", k.token, "kind", kv.Kind, "reaction", req.Reaction)
		w.st.finish(k, failComplete(echo, "deadline exceeded", false))
	}
}

// callHandler runs Work, turning a panic into a transient failure with its message.
func callHandler(ctx context.Context, log *slog.Logger, p Provider, req *ReactionRequest, echo taskEcho) (c *pb.StageComplete) {
	defer func() {
		if r := recover(); r != nil {
			log.Warn("handler panicked", "lease", echo.leaseToken, "panic", r)
			c = failComplete(echo, fmt.Sprintf("handler panicked: %v", r), false)
		}
	}()
	o, err := p.Work(ctx, req)
	return resultComplete(echo, o, err)
}
