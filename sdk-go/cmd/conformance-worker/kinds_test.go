package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	converge "converge.dev/sdk-go"
	"converge.dev/sdk-go/convergetest"
)

func find(t *testing.T, ps []converge.Provider, kind string) converge.Provider {
	for _, p := range ps {
		if p.Kind().Kind == kind {
			return p
		}
	}
	t.Fatalf("no provider for %s", kind)
	return nil
}

func asJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestConformanceKinds(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "events.log")
	events, err := openEventLog(logPath, "go")
	if err != nil {
		t.Fatal(err)
	}
	defer events.close()
	ps := providers("go", events)
	ctx := context.Background()

	o, err := convergetest.Run(ctx, find(t, ps, "conf-leaf"), convergetest.Request("conf-leaf", map[string]any{"x": 1}))
	if err != nil || asJSON(t, o.Status) != `{"attempt":1,"echo":{"x":1},"form":"go","generation":1,"trigger":"specChange"}` {
		t.Fatalf("leaf: %s %v", asJSON(t, o.Status), err)
	}

	req := convergetest.Request("conf-composite", map[string]any{"children": 3})
	req.Reaction, req.Stage, req.Resource.Name = "compose", converge.StageCompose, "c"
	o, err = convergetest.Run(ctx, find(t, ps, "conf-composite"), req)
	if err != nil || len(o.Children) != 3 || len(o.Edges) != 2 || o.Children[2].Name != "c-2" ||
		o.Edges[1].From.Name != "c-2" || o.Edges[1].To.Name != "c-1" || o.Edges[0].Values[0].DependentField != "/upstream_index" {
		t.Fatalf("compose: %+v %v", o, err)
	}

	sum := find(t, ps, "conf-summary")
	req = convergetest.Request("conf-summary", map[string]any{"children": 3})
	req.Reaction, req.Stage, req.Resource.Name = "compose", converge.StageCompose, "s"
	if o, err = convergetest.Run(ctx, sum, req); err != nil || len(o.Children) != 3 || len(o.Edges) != 0 || o.Children[2].Name != "s-2" {
		t.Fatalf("summary compose: %+v %v", o, err)
	}
	var rows []converge.Resource
	for i := range 5 {
		rows = append(rows, converge.Resource{ID: converge.UUID{15: byte(i + 1)}, Kind: "conf-leaf", Name: fmt.Sprintf("s-%d", i)})
	}
	for _, tc := range []struct {
		pageSize int
		want     string
	}{
		{0, `{"by_kind":{"conf-leaf":5},"by_phase":{"Ready":5},"distinct":0,"included":false,"not_ready":0,"pages":0,"read":0,"sent":0,"total":5}`},
		{2, `{"by_kind":{"conf-leaf":5},"by_phase":{"Ready":5},"distinct":5,"included":false,"not_ready":0,"pages":3,"read":5,"sent":0,"total":5}`},
	} {
		req = convergetest.Request("conf-summary", map[string]any{"children": 5, "page_size": tc.pageSize})
		req.Reaction, req.Stage = "rollup", converge.StageRollup
		req.Summary = &converge.RollupSummary{Total: 5, ByKind: map[string]int64{"conf-leaf": 5}, ByPhase: map[string]int64{"Ready": 5}}
		req.Subtree = converge.FixedSubtree(rows)
		if o, err = convergetest.Run(ctx, sum, req); err != nil || asJSON(t, o.Status) != tc.want {
			t.Fatalf("summary rollup at page size %d: %v %v", tc.pageSize, o, err)
		}
	}

	fail := find(t, ps, "conf-fail")
	req = convergetest.Request("conf-fail", map[string]any{"mode": "transient", "times": 1})
	if _, err := convergetest.Run(ctx, fail, req); err == nil || converge.IsTerminal(err) || err.Error() != "conformance transient 1" {
		t.Fatalf("transient: %v", err)
	}
	req.Attempt = 2
	if o, err := convergetest.Run(ctx, fail, req); err != nil || asJSON(t, o.Status) != `{"attempt":2,"ok":true}` {
		t.Fatalf("transient then ok: %v", err)
	}
	if _, err := convergetest.Run(ctx, fail, convergetest.Request("conf-fail", map[string]any{"mode": "terminal"})); !converge.IsTerminal(err) {
		t.Fatalf("terminal: %v", err)
	}
	if _, err := convergetest.Run(ctx, fail, convergetest.Request("conf-fail", map[string]any{"mode": "panic"})); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("panic: %v", err)
	}

	slowReq := convergetest.Deadline(convergetest.Request("conf-slow", map[string]any{"sleep_ms": 5000}), 20*time.Millisecond)
	if _, err := convergetest.Run(ctx, find(t, ps, "conf-slow"), slowReq); err == nil {
		t.Fatal("slow: the deadline must interrupt the sleep")
	}

	cfgReq := convergetest.Request("conf-config", nil)
	cfgReq.Config = converge.ProviderConfig{Spec: json.RawMessage(`{"a":1,"n":{"x":1}}`), Bundle: []byte("abc")}
	cfgReq.ConfigOverride = json.RawMessage(`{"n":{"y":2}}`)
	o, err = convergetest.Run(ctx, find(t, ps, "conf-config"), cfgReq)
	if err != nil || asJSON(t, o.Status) != `{"bundle_len":3,"config":{"a":1,"n":{"x":1,"y":2}}}` {
		t.Fatalf("config: %s %v", asJSON(t, o.Status), err)
	}

	r := find(t, ps, "conf-ready").(*ready)
	r.OnConfig(converge.ProviderConfig{Spec: json.RawMessage(`{"ready":false}`)})
	if r.Ready() {
		t.Fatal("ready:false must make conf-ready unready")
	}
	r.OnConfig(converge.ProviderConfig{})
	if !r.Ready() {
		t.Fatal("no config means ready")
	}

	deadline := time.Now().Add(5 * time.Second)
	var lines []string
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) >= 12 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first["form"] != "go" || first["stage"] != "STAGE_WORK" || first["event"] != "work" || first["kind"] != "conf-leaf" {
		t.Fatalf("event line: %s %v", lines[0], err)
	}
	if !strings.Contains(strings.Join(lines, "\n"), `"event":"cancelled"`) {
		t.Fatalf("the slow handler must log its cancellation: %v", lines)
	}
}

func TestReactKind(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "events.log")
	events, err := openEventLog(logPath, "go")
	if err != nil {
		t.Fatal(err)
	}
	defer events.close()
	p := find(t, providers("go", events), "conf-react")
	req := convergetest.Request("conf-react", map[string]any{"react_failures": 1})
	req.Reaction, req.Stage = "react", converge.StageReact
	req.Transition, req.DedupToken = converge.TransitionSynced, "id:synced:1:b"
	ctx := context.Background()
	if _, err := convergetest.Run(ctx, p, req); err == nil || converge.IsTerminal(err) || err.Error() != "react failure 1" {
		t.Fatalf("first delivery: %v", err)
	}
	req.Attempt = 2
	if _, err := convergetest.Run(ctx, p, req); err != nil {
		t.Fatalf("second delivery: %v", err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("react lines: %v", lines)
	}
	for _, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil || e["event"] != "react" || e["stage"] != "STAGE_REACT" ||
			e["transition"] != "TRANSITION_SYNCED" || e["dedup_token"] != "id:synced:1:b" {
			t.Fatalf("react line: %s %v", l, err)
		}
	}
}
