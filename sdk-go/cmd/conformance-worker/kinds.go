package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	converge "converge.dev/sdk-go"
)

func kv(kind string) converge.KindVersion { return converge.KindVersion{Kind: kind, Version: 1} }

// providers is every conformance kind, all at version 1.
func providers(form string, events *eventLog) []converge.Provider {
	b := base{form: form, events: events}
	return []converge.Provider{
		leaf{b, "conf-leaf"},
		composite{b},
		summary{b},
		final{b},
		failing{b},
		slow{b, "conf-slow"},
		slow{b, "conf-hold"},
		react{b},
		&ready{base: b},
		config{b},
	}
}

// base holds what every conformance provider shares.
type base struct {
	form   string
	events *eventLog
}

// start logs the handler's start event.
func (b base) start(req *converge.ReactionRequest) {
	b.events.record(req, stageEvent(req.Stage))
}

// echoStatus is the status of the leaf-like `work` reactions.
func (b base) echoStatus(req *converge.ReactionRequest) *converge.Outcome {
	return converge.StatusOutcome(map[string]any{
		"echo":       req.Resource.Spec,
		"form":       b.form,
		"generation": req.Generation,
		"attempt":    req.Attempt,
		"trigger":    req.Trigger,
	})
}

func unknownReaction(req *converge.ReactionRequest) error {
	return converge.Terminalf("%s has no reaction %q", req.Kind, req.Reaction)
}

// leaf is conf-leaf: echo the spec (work) and answer ping (operate).
type leaf struct {
	base
	kind string
}

func (l leaf) Kind() converge.KindVersion { return kv(l.kind) }

func (l leaf) Work(_ context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	l.start(req)
	switch req.Reaction {
	case "work":
		return l.echoStatus(req), nil
	case "ping":
		input := json.RawMessage("null")
		if req.Operation != nil && len(req.Operation.Input) > 0 {
			input = req.Operation.Input
		}
		return converge.OutputOutcome(map[string]any{"pong": input, "name": req.Resource.Name}), nil
	}
	return nil, unknownReaction(req)
}

// composite is conf-composite: a chain of conf-leaf children with value flows.
type composite struct{ base }

func (composite) Kind() converge.KindVersion { return kv("conf-composite") }

func (c composite) Work(_ context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	c.start(req)
	var spec struct {
		Children *int `json:"children"`
	}
	if err := req.Spec(&spec); err != nil {
		return nil, err
	}
	n := 2
	if spec.Children != nil {
		n = *spec.Children
	}
	switch req.Reaction {
	case "compose":
		out := converge.StatusOutcome(map[string]any{"composed": n})
		name := func(i int) string { return fmt.Sprintf("%s-%d", req.Resource.Name, i) }
		for i := 0; i < n; i++ {
			out.WithChild(converge.NewChild("conf-leaf", 1, name(i), map[string]any{"index": i}))
			if i >= 1 {
				out.WithEdge(converge.NewEdge(converge.Ref("conf-leaf", name(i)), converge.Ref("conf-leaf", name(i-1))).
					WithValue(converge.Flow("/upstream_index", "/echo/index")))
			}
		}
		if out.Children == nil {
			// An empty successful list is a real answer (prune every child), not an omission.
			out.Children = []converge.ChildSpec{}
		}
		return out, nil
	case "rollup":
		readyCount := 0
		for _, d := range req.Descendants {
			if d.IsReady {
				readyCount++
			}
		}
		return converge.StatusOutcome(map[string]any{
			"composed":    n,
			"descendants": len(req.Descendants),
			"ready":       readyCount,
		}), nil
	}
	return nil, unknownReaction(req)
}

// summary is conf-summary: children without edges, and a rollup that reads the summary
// and pages through the descendants only when spec.page_size asks it to.
type summary struct{ base }

func (summary) Kind() converge.KindVersion { return kv("conf-summary") }

func (s summary) Work(ctx context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	s.start(req)
	var spec struct {
		Children *int `json:"children"`
		PageSize int  `json:"page_size"`
	}
	if err := req.Spec(&spec); err != nil {
		return nil, err
	}
	n := 2
	if spec.Children != nil {
		n = *spec.Children
	}
	switch req.Reaction {
	case "compose":
		out := converge.StatusOutcome(map[string]any{"composed": n})
		for i := 0; i < n; i++ {
			out.WithChild(converge.NewChild("conf-leaf", 1, fmt.Sprintf("%s-%d", req.Resource.Name, i), map[string]any{"index": i}))
		}
		if out.Children == nil {
			out.Children = []converge.ChildSpec{} // prune every child: a real answer
		}
		return out, nil
	case "rollup":
		sum := req.Summary
		if sum == nil {
			sum = &converge.RollupSummary{}
		}
		pages, read, ids := 0, 0, map[converge.UUID]struct{}{}
		if spec.PageSize > 0 {
			pager := req.DescendantPages(spec.PageSize)
			for {
				page, ok, err := pager.Next(ctx)
				if err != nil {
					return nil, err
				}
				if !ok {
					break
				}
				pages++
				read += len(page)
				for _, d := range page {
					ids[d.ID] = struct{}{}
				}
			}
		}
		return converge.StatusOutcome(map[string]any{
			"sent":      len(req.Descendants),
			"included":  req.DescendantsIncluded,
			"total":     sum.Total,
			"by_kind":   counts(sum.ByKind),
			"by_phase":  counts(sum.ByPhase),
			"not_ready": sum.NotReadyTotal,
			"pages":     pages,
			"read":      read,
			"distinct":  len(ids),
		}), nil
	}
	return nil, unknownReaction(req)
}

// counts is m, or an empty map for nil, so that it encodes as {} rather than null.
func counts(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}

// final is conf-final: a leaf whose teardown fails transiently a given number of times.
type final struct{ base }

func (final) Kind() converge.KindVersion { return kv("conf-final") }

func (f final) Work(_ context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	f.start(req)
	switch req.Reaction {
	case "work":
		return f.echoStatus(req), nil
	case "teardown":
		var spec struct {
			DeleteFailures int32 `json:"delete_failures"`
		}
		// A spec that does not decode is treated as "no failures": teardown must not wedge.
		_ = json.Unmarshal(req.Resource.Spec, &spec)
		if spec.DeleteFailures > 0 && req.Attempt <= spec.DeleteFailures {
			return nil, fmt.Errorf("teardown failure %d", req.Attempt)
		}
		return &converge.Outcome{}, nil
	}
	return nil, unknownReaction(req)
}

// failing is conf-fail: fails terminally, transiently or by panicking as its spec says.
type failing struct{ base }

func (failing) Kind() converge.KindVersion { return kv("conf-fail") }

func (f failing) Work(_ context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	f.start(req)
	if req.Reaction != "work" {
		return nil, unknownReaction(req)
	}
	var spec struct {
		Mode  string `json:"mode"`
		Times int32  `json:"times"`
	}
	if err := req.Spec(&spec); err != nil {
		return nil, err
	}
	ok := converge.StatusOutcome(map[string]any{"ok": true, "attempt": req.Attempt})
	switch spec.Mode {
	case "", "ok":
		return ok, nil
	case "terminal":
		return nil, converge.Terminal(errors.New("conformance terminal"))
	case "transient":
		if spec.Times == 0 || req.Attempt <= spec.Times {
			return nil, fmt.Errorf("conformance transient %d", req.Attempt)
		}
		return ok, nil
	case "panic":
		var m map[string]int
		m["boom"] = 1 // an unexpected runtime error, not the SDK's error type
		return ok, nil
	}
	return nil, converge.Terminalf("unknown mode %q", spec.Mode)
}

// slow is conf-slow (and conf-hold, the same under a long deadline): sleeps, cooperatively
// cancellable.
type slow struct {
	base
	kind string
}

func (s slow) Kind() converge.KindVersion { return kv(s.kind) }

func (s slow) Work(ctx context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	s.start(req)
	if req.Reaction != "work" {
		return nil, unknownReaction(req)
	}
	var spec struct {
		SleepMs int64 `json:"sleep_ms"`
	}
	if err := req.Spec(&spec); err != nil {
		return nil, err
	}
	t := time.NewTimer(time.Duration(spec.SleepMs) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return converge.StatusOutcome(map[string]any{"slept_ms": spec.SleepMs, "attempt": req.Attempt}), nil
	case <-ctx.Done():
		ev := s.events.line(req, "cancelled")
		reason := converge.CancelReason(ctx)
		ev.Reason = &reason
		s.events.write(ev)
		return nil, fmt.Errorf("sleep cancelled: %w", ctx.Err())
	}
}

// react is conf-react: logs each delivery's transition and dedup token, and fails
// transiently while the attempt is at most the watched resource's react_failures.
type react struct{ base }

func (react) Kind() converge.KindVersion { return kv("conf-react") }

func (r react) Work(_ context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	if req.Reaction != "react" {
		return nil, unknownReaction(req)
	}
	ev := r.events.line(req, "react")
	transition, token := req.Transition.String(), req.DedupToken
	ev.Transition, ev.DedupToken = &transition, &token
	r.events.write(ev)
	var spec struct {
		ReactFailures int32 `json:"react_failures"`
	}
	// A spec that does not decode means "no failures": the watched kind owns its spec.
	_ = json.Unmarshal(req.Resource.Spec, &spec)
	if spec.ReactFailures > 0 && req.Attempt <= spec.ReactFailures {
		return nil, fmt.Errorf("react failure %d", req.Attempt)
	}
	return &converge.Outcome{}, nil
}

// ready is conf-ready: ready unless the default config spec says "ready": false.
type ready struct {
	base
	unready atomic.Bool
}

func (*ready) Kind() converge.KindVersion { return kv("conf-ready") }

func (r *ready) Work(_ context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	r.start(req)
	if req.Reaction != "work" {
		return nil, unknownReaction(req)
	}
	return r.echoStatus(req), nil
}

func (r *ready) OnConfig(cfg converge.ProviderConfig) {
	var spec struct {
		Ready *bool `json:"ready"`
	}
	_ = json.Unmarshal(cfg.Spec, &spec)
	r.unready.Store(spec.Ready != nil && !*spec.Ready)
}

func (r *ready) Ready() bool { return !r.unready.Load() }

// config is conf-config: echoes its effective provider config and bundle size.
type config struct{ base }

func (config) Kind() converge.KindVersion { return kv("conf-config") }

func (c config) Work(_ context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	c.start(req)
	if req.Reaction != "work" {
		return nil, unknownReaction(req)
	}
	eff, err := req.EffectiveConfig()
	if err != nil {
		return nil, converge.Terminal(err)
	}
	return converge.StatusOutcome(map[string]any{
		"config":     eff,
		"bundle_len": len(req.EffectiveBundle()),
	}), nil
}
