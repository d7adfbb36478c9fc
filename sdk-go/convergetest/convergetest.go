// Package convergetest runs a converge provider with no broker: build a request, call
// the handler, inspect the outcome.
//
// Run calls Provider.Work directly (with the request's deadline and panic capture, as the
// runtime applies them); ExecuteTask runs the real wire path (StageTask decode → Work →
// StageComplete encode) that the worker runtime uses. To test a rollup that pages, set
// req.Summary and req.Subtree = converge.FixedSubtree(rows) on the request.
package convergetest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	converge "converge.dev/sdk-go"
	pb "converge.dev/sdk-go/gen/workerv1"
)

// ErrDeadlineExceeded is what Run returns when the request's deadline passes first (a
// transient failure, as in the runtime).
var ErrDeadlineExceeded = errors.New("deadline exceeded")

// Request is a WORK request for a fresh resource of kind (version 1) named "test" with
// spec: reaction "work", trigger specChange, generation 1, attempt 1, no deadline, no
// config. spec is anything encoding/json can marshal (nil means {}). Adjust the fields
// for other cases.
func Request(kind string, spec any) *converge.ReactionRequest {
	raw := json.RawMessage("{}")
	if spec != nil {
		b, err := json.Marshal(spec)
		if err != nil {
			panic(fmt.Sprintf("convergetest.Request: cannot encode spec: %v", err))
		}
		raw = b
	}
	var id converge.UUID
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40 // a version-4 UUID, like the control plane's
	id[8] = id[8]&0x3f | 0x80
	return &converge.ReactionRequest{
		Reaction:    "work",
		Stage:       converge.StageWork,
		Trigger:     converge.TriggerSpecChange,
		Kind:        kind,
		KindVersion: 1,
		Resource: converge.Resource{
			ID:          id,
			Kind:        kind,
			KindVersion: 1,
			Name:        "test",
			Spec:        raw,
			Generation:  1,
			Phase:       "Reconciling",
		},
		Generation: 1,
		Attempt:    1,
	}
}

// Run calls p.Work(ctx, req). With req.Deadline set, the handler's context ends then and
// Run returns ErrDeadlineExceeded if the handler has not returned; a panic comes back as
// a (transient) error "handler panicked: ...", as in the runtime.
func Run(ctx context.Context, p converge.Provider, req *converge.ReactionRequest) (*converge.Outcome, error) {
	if !req.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, req.Deadline, &converge.CancelledError{Reason: converge.CancelDeadline})
		defer cancel()
	}
	type result struct {
		o   *converge.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("handler panicked: %v", r)}
			}
		}()
		o, err := p.Work(ctx, req)
		done <- result{o, err}
	}()
	// A handler that failed because the deadline cancelled its context reports the
	// deadline, whichever side noticed first.
	settle := func(r result) (*converge.Outcome, error) {
		if r.err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ErrDeadlineExceeded
		}
		return r.o, r.err
	}
	select {
	case r := <-done:
		return settle(r)
	case <-ctx.Done():
		select {
		case r := <-done:
			return settle(r)
		default:
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ErrDeadlineExceeded
		}
		return nil, ctx.Err()
	}
}

// ExecuteTask runs one wire task through providers exactly as the runtime does, with cfg
// as the kind's cached default config, and returns the StageComplete the worker would send.
func ExecuteTask(ctx context.Context, providers []converge.Provider, task *pb.StageTask, cfg converge.ProviderConfig) *pb.StageComplete {
	return converge.ExecuteTask(ctx, providers, task, cfg)
}

// Deadline sets req.Deadline to d from now and returns req (for one-line setups).
func Deadline(req *converge.ReactionRequest, d time.Duration) *converge.ReactionRequest {
	req.Deadline = time.Now().Add(d)
	return req
}
