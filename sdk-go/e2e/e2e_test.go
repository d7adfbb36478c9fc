package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	converge "converge.dev/sdk-go"
)

func kv(kind string) converge.KindVersion { return converge.KindVersion{Kind: kind, Version: 1} }

// greeter returns a status built from the spec and the request.
func greeter(kind string) converge.Provider {
	return converge.ProviderFunc(kv(kind), func(_ context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
		var spec struct {
			Greeting string `json:"greeting"`
		}
		if err := req.Spec(&spec); err != nil {
			return nil, err
		}
		return converge.StatusOutcome(map[string]any{
			"message":    fmt.Sprintf("%s, %s!", spec.Greeting, req.Resource.Name),
			"generation": req.Generation,
			"trigger":    req.Trigger,
		}).WithCondition(converge.ReadyCondition(true, "Greeted", "said hello")), nil
	})
}

func TestLeafReachesReadyWithItsStatus(t *testing.T) {
	s := startServer(t)
	s.applyManifest(leafManifest("go-hello", 30))
	startWorker(t, s, "go-e2e", []converge.Provider{greeter("go-hello")})

	s.apply("go-hello", "world", map[string]any{"greeting": "hi"})
	r := s.waitResource("go-hello", "world", "Ready", phaseIs("Ready"))
	status, _ := r["status"].(map[string]any)
	if status["message"] != "hi, world!" || status["generation"] != float64(1) || status["trigger"] != "specChange" {
		t.Fatalf("unexpected status: %v", r["status"])
	}

	// A spec edit reconciles again at the new generation.
	s.apply("go-hello", "world", map[string]any{"greeting": "hey"})
	r = s.waitResource("go-hello", "world", "Ready at generation 2", func(r map[string]any) bool {
		return r["phase"] == "Ready" && r["synced_gen"] == float64(2)
	})
	if msg := r["status"].(map[string]any)["message"]; msg != "hey, world!" {
		t.Fatalf("status after the edit: %v", r["status"])
	}
}

func TestAGzipWorkerReachesReady(t *testing.T) {
	// GRPC_COMPRESSION=gzip: every message the worker sends is gzipped, and the broker
	// answers in gzip (before it accepted gzip, such a worker got UNIMPLEMENTED).
	s := startServer(t)
	s.applyManifest(leafManifest("go-zipped", 30))
	startWorker(t, s, "go-e2e-gzip", []converge.Provider{greeter("go-zipped")},
		converge.WithCompression(converge.CompressionGzip), converge.WithMaxMessageBytes(converge.MaxMessageBytesCeiling))

	s.apply("go-zipped", "world", map[string]any{"greeting": "hi"})
	r := s.waitResource("go-zipped", "world", "Ready", phaseIs("Ready"))
	if msg := r["status"].(map[string]any)["message"]; msg != "hi, world!" {
		t.Fatalf("unexpected status: %v", r["status"])
	}
}

func TestTerminalErrorFails(t *testing.T) {
	s := startServer(t)
	s.applyManifest(leafManifest("go-doomed", 30))
	var calls atomic.Int32
	p := converge.ProviderFunc(kv("go-doomed"), func(context.Context, *converge.ReactionRequest) (*converge.Outcome, error) {
		calls.Add(1)
		return nil, converge.Terminalf("cannot ever work")
	})
	startWorker(t, s, "go-e2e", []converge.Provider{p})

	s.apply("go-doomed", "x", map[string]any{})
	r := s.waitResource("go-doomed", "x", "Failed", phaseIs("Failed"))
	if r["failure_terminal"] != true {
		t.Fatalf("failure must be terminal: %v", r)
	}
	if r["failure_attempts"] != float64(1) {
		t.Fatalf("a terminal failure is not retried: %v", r)
	}
}

func TestPanicIsTransientAndRetried(t *testing.T) {
	s := startServer(t)
	s.applyManifest(leafManifest("go-flaky", 30))
	p := converge.ProviderFunc(kv("go-flaky"), func(_ context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
		if req.Attempt < 3 {
			var m map[string]int
			m["boom"]++ // a runtime panic, not an SDK error
		}
		return converge.StatusOutcome(map[string]any{"attempt": req.Attempt}), nil
	})
	startWorker(t, s, "go-e2e", []converge.Provider{p})

	s.apply("go-flaky", "x", map[string]any{})
	r := s.waitResource("go-flaky", "x", "Ready after retries", phaseIs("Ready"))
	if got := r["status"].(map[string]any)["attempt"]; got != float64(3) {
		t.Fatalf("want success on attempt 3 after two panics, got status %v", r["status"])
	}
}

func TestWorkerStoppedMidTaskAndRestartedConverges(t *testing.T) {
	s := startServer(t)
	s.applyManifest(leafManifest("go-victim", 30))
	started := make(chan struct{}, 1)
	var runs atomic.Int32
	// The first run blocks until its worker stops; later runs succeed at once.
	p := converge.ProviderFunc(kv("go-victim"), func(ctx context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
		if runs.Add(1) == 1 {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return converge.StatusOutcome(map[string]any{"run": runs.Load()}), nil
	})
	first := startWorker(t, s, "go-first", []converge.Provider{p}, converge.WithDrainTimeout(100*time.Millisecond))
	s.apply("go-victim", "x", map[string]any{})
	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("the first worker never started the task")
	}
	first.stop(t) // mid-task: the drain times out and the handler is cancelled
	if got := s.get("go-victim", "x")["phase"]; got == "Ready" {
		t.Fatalf("nothing may have completed yet, phase %v", got)
	}

	startWorker(t, s, "go-second", []converge.Provider{p})
	r := s.waitResource("go-victim", "x", "Ready after the restart", phaseIs("Ready"))
	if r["status"].(map[string]any)["run"] != float64(2) {
		t.Fatalf("want the second run's status, got %v", r["status"])
	}
}

func TestComposeWithEdgesFlowsAndRollup(t *testing.T) {
	s := startServer(t)
	s.applyManifest(leafManifest("go-part", 30))
	s.applyManifest(map[string]any{
		"kind": "go-stack", "kind_version": 1,
		"reactions": []any{
			map[string]any{"name": "compose", "trigger": "specChange", "emits": []any{"children", "edges", "status"}},
			// The full form: the rollup below reads req.Descendants.
			map[string]any{"name": "rollup", "trigger": "childrenSettled", "emits": []any{"status", "conditions"}, "descendants": "full"},
		},
	})
	part := converge.ProviderFunc(kv("go-part"), func(_ context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
		return converge.StatusOutcome(map[string]any{"echo": req.Resource.Spec}), nil
	})
	stack := converge.ProviderFunc(kv("go-stack"), func(_ context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
		switch req.Reaction {
		case "compose":
			a, b := req.Resource.Name+"-a", req.Resource.Name+"-b"
			return converge.StatusOutcome(map[string]any{"composed": 2}).
				WithChild(converge.NewChild("go-part", 1, a, map[string]any{"index": 0})).
				WithChild(converge.NewChild("go-part", 1, b, map[string]any{"index": 1})).
				WithEdge(converge.NewEdge(converge.Ref("go-part", b), converge.Ref("go-part", a)).
					WithValue(converge.Flow("/upstream_index", "/echo/index"))), nil
		case "rollup":
			ready := 0
			for _, d := range req.Descendants {
				if d.IsReady {
					ready++
				}
			}
			return converge.StatusOutcome(map[string]any{"descendants": len(req.Descendants), "ready": ready}), nil
		}
		return nil, converge.Terminalf("unknown reaction %q", req.Reaction)
	})
	startWorker(t, s, "go-e2e", []converge.Provider{part, stack})

	s.apply("go-stack", "web", map[string]any{})
	r := s.waitResource("go-stack", "web", "rolled up", func(r map[string]any) bool {
		st, _ := r["status"].(map[string]any)
		return r["phase"] == "Ready" && st["descendants"] == float64(2)
	})
	if r["status"].(map[string]any)["ready"] != float64(2) {
		t.Fatalf("rollup status: %v", r["status"])
	}
	b := s.get("go-part", "web-b")
	spec, _ := b["spec"].(map[string]any)
	if spec["upstream_index"] != float64(0) {
		t.Fatalf("the value flow did not reach web-b's spec: %v", b["spec"])
	}
}

// flipper is a provider whose readiness the test controls.
type flipper struct {
	ready atomic.Bool
	calls atomic.Int32
}

func (*flipper) Kind() converge.KindVersion { return kv("go-gated") }
func (f *flipper) Ready() bool              { return f.ready.Load() }

func (f *flipper) Work(context.Context, *converge.ReactionRequest) (*converge.Outcome, error) {
	f.calls.Add(1)
	return converge.StatusOutcome(map[string]any{"ok": true}), nil
}

func TestUnreadyKindGetsNoTasksUntilItFlips(t *testing.T) {
	s := startServer(t)
	s.applyManifest(leafManifest("go-gated", 30))
	s.applyManifest(leafManifest("go-open", 30))
	gated := &flipper{}
	startWorker(t, s, "go-e2e", []converge.Provider{gated, greeter("go-open")})

	s.apply("go-gated", "g", map[string]any{})
	s.apply("go-open", "o", map[string]any{"greeting": "hi"})
	// The open kind converging proves the worker takes tasks; the gated one got none.
	s.waitResource("go-open", "o", "Ready", phaseIs("Ready"))
	if n := gated.calls.Load(); n != 0 {
		t.Fatalf("an unready kind ran %d tasks", n)
	}
	if got := s.get("go-gated", "g")["phase"]; got == "Ready" || got == "Failed" {
		t.Fatalf("readiness must never fail or complete a task, phase %v", got)
	}
	gated.ready.Store(true)
	s.waitResource("go-gated", "g", "Ready after the flip", phaseIs("Ready"))
}
