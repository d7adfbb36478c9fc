// Rollups that do not ship the subtree, against the real broker: a rollup that reads
// nothing gets the summary and no descendant, one that pages (ListDescendants) reads every
// descendant exactly once, and a page asked for after the task ended is refused because
// the lease is gone.

package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	converge "converge.dev/sdk-go"
)

// pagedTree is kind go-tree (summary form): compose spec.n go-twig children; the rollup
// pages at spec.page (0: reads nothing) and records every descendant it read; with
// spec.keep it also keeps a pager past the end of its task.
type pagedTree struct {
	mu    sync.Mutex
	reads map[string]map[converge.UUID]int // root name -> descendant id -> times read
	pages map[string]int
	kept  *converge.DescendantPages
}

func (*pagedTree) Kind() converge.KindVersion { return kv("go-tree") }

func (p *pagedTree) Work(ctx context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	var spec struct {
		N    int  `json:"n"`
		Page int  `json:"page"`
		Keep bool `json:"keep"`
	}
	if err := req.Spec(&spec); err != nil {
		return nil, err
	}
	name := req.Resource.Name
	switch req.Reaction {
	case "compose":
		out := converge.StatusOutcome(map[string]any{})
		for i := 0; i < spec.N; i++ {
			out.WithChild(converge.NewChild("go-twig", 1, fmt.Sprintf("%s-%d", name, i), map[string]any{}))
		}
		return out, nil
	case "rollup":
		if spec.Page > 0 {
			// Only the last rollup's reads count: each rollup is one full pass.
			p.mu.Lock()
			p.reads[name], p.pages[name] = map[converge.UUID]int{}, 0
			p.mu.Unlock()
			pager := req.DescendantPages(spec.Page)
			for {
				page, ok, err := pager.Next(ctx)
				if err != nil {
					return nil, err
				}
				if !ok {
					break
				}
				p.mu.Lock()
				p.pages[name]++
				for _, d := range page {
					p.reads[name][d.ID]++
				}
				p.mu.Unlock()
			}
		}
		if spec.Keep {
			p.mu.Lock()
			p.kept = req.DescendantPages(5)
			p.mu.Unlock()
		}
		s := req.Summary
		return converge.StatusOutcome(map[string]any{
			"total": s.Total, "ready": s.Ready(), "by_kind": s.ByKind,
			"sent": len(req.Descendants), "included": req.DescendantsIncluded,
		}), nil
	}
	return nil, converge.Terminalf("unknown reaction %q", req.Reaction)
}

func TestRollupSummaryAndPagedDescendants(t *testing.T) {
	s := startServer(t)
	s.applyManifest(leafManifest("go-twig", 30))
	s.applyManifest(map[string]any{
		"kind": "go-tree", "kind_version": 1,
		"reactions": []any{
			map[string]any{"name": "compose", "trigger": "specChange", "emits": []any{"children", "status"}},
			map[string]any{"name": "rollup", "trigger": "childrenSettled", "emits": []any{"status"}},
		},
	})
	twig := converge.ProviderFunc(kv("go-twig"), func(context.Context, *converge.ReactionRequest) (*converge.Outcome, error) {
		return converge.StatusOutcome(map[string]any{"ok": true}), nil
	})
	tree := &pagedTree{reads: map[string]map[converge.UUID]int{}, pages: map[string]int{}}
	startWorker(t, s, "go-e2e-rollup", []converge.Provider{twig, tree})

	s.apply("go-tree", "quiet", map[string]any{"n": 4})
	s.apply("go-tree", "paged", map[string]any{"n": 5, "page": 2, "keep": true})
	for _, root := range []struct {
		name string
		n    int
	}{{"quiet", 4}, {"paged", 5}} {
		r := s.waitResource("go-tree", root.name, "rolled up over every child", func(r map[string]any) bool {
			st, _ := r["status"].(map[string]any)
			return r["phase"] == "Ready" && st["ready"] == float64(root.n)
		})
		st := r["status"].(map[string]any)
		byKind, _ := st["by_kind"].(map[string]any)
		if st["total"] != float64(root.n) || byKind["go-twig"] != float64(root.n) || st["sent"] != float64(0) || st["included"] != false {
			t.Fatalf("%s: a summary-form rollup gets the counts and no descendant: %v", root.name, st)
		}
	}

	tree.mu.Lock()
	quiet, paged, pages, kept := len(tree.reads["quiet"]), tree.reads["paged"], tree.pages["paged"], tree.kept
	tree.mu.Unlock()
	if quiet != 0 || tree.pages["quiet"] != 0 {
		t.Fatalf("the rollup that reads nothing read %d descendants", quiet)
	}
	if len(paged) != 5 || pages != 3 {
		t.Fatalf("paging read %d distinct descendants over %d pages, want all 5 over 3 (2+2+1)", len(paged), pages)
	}
	for id, n := range paged {
		if n != 1 {
			t.Fatalf("descendant %v was read %d times, want exactly once", id, n)
		}
	}

	// The task that made the kept pager is over: its lease is gone, so the broker refuses.
	if kept == nil {
		t.Fatal("the rollup did not keep a pager")
	}
	_, ok, err := kept.Next(context.Background())
	var de *converge.DescendantsError
	if ok || !errors.As(err, &de) || !de.LeaseGone() || converge.IsTerminal(err) {
		t.Fatalf("a page after the task ended: ok=%v err=%v; want a transient *DescendantsError with LeaseGone", ok, err)
	}
}
