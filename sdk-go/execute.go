package converge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	pb "converge.dev/sdk-go/gen/workerv1"
)

// ExecuteTask runs one wire task exactly as the worker runtime does — dispatch by (kind,
// kind_version), decode, the handler with panic capture and the task deadline, encode —
// with cfg as the kind's cached default config, and returns the StageComplete the worker
// would send. It needs no broker; convergetest builds on it. A ROLLUP handler there has no
// subtree to page through (DescendantPages fails terminally) unless the task carries the
// full form.
func ExecuteTask(ctx context.Context, providers []Provider, task *pb.StageTask, cfg ProviderConfig) *pb.StageComplete {
	echo := echoOf(task)
	kv := KindVersion{Kind: task.GetKind(), Version: wireVersion(task.GetKindVersion())}
	var p Provider
	for _, candidate := range providers {
		if candidate != nil && candidate.Kind() == kv {
			p = candidate
			break
		}
	}
	if p == nil {
		return failComplete(echo, fmt.Sprintf("no provider for %s on this worker", kv), true)
	}
	var deadline time.Time
	if ms := task.GetTaskDeadlineMs(); ms > 0 {
		deadline = time.Now().Add(time.Duration(ms) * time.Millisecond)
	}
	req, err := requestFromTask(task, cfg, deadline, nil)
	if err != nil {
		return failComplete(echo, err.Error(), true)
	}
	return runRequest(ctx, slog.Default(), p, req, echo)
}

// runRequest runs a decoded request under its deadline (and ctx), without the runtime's
// bookkeeping: a handler still running at the deadline yields a transient failure.
func runRequest(ctx context.Context, log *slog.Logger, p Provider, req *ReactionRequest, echo taskEcho) *pb.StageComplete {
	hctx, cancel := ctx, context.CancelFunc(func() {})
	if !req.Deadline.IsZero() {
		hctx, cancel = context.WithDeadlineCause(ctx, req.Deadline, &CancelledError{Reason: CancelDeadline})
	}
	defer cancel()
	done := make(chan *pb.StageComplete, 1)
	go func() { done <- callHandler(hctx, log, p, req, echo) }()
	select {
	case c := <-done:
		if deadlineHit(c, ctx, hctx) {
			return failComplete(echo, "deadline exceeded", false)
		}
		return c
	case <-hctx.Done():
		select {
		case c := <-done:
			if !deadlineHit(c, ctx, hctx) {
				return c
			}
		default:
		}
		if ctx.Err() != nil {
			return failComplete(echo, "task cancelled: "+ctx.Err().Error(), false)
		}
		return failComplete(echo, "deadline exceeded", false)
	}
}

// deadlineHit reports whether c is an error result of a handler whose context (handler) hit
// its deadline while outer is still live. Such a result reports the deadline, not the
// handler's own wording of it, so the outcome does not depend on which side noticed first.
func deadlineHit(c *pb.StageComplete, outer, handler context.Context) bool {
	return c.GetErrorMessage() != "" && outer.Err() == nil && errors.Is(handler.Err(), context.DeadlineExceeded)
}
