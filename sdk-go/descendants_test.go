// Tests of the rollup summary and the paged descendant read, against the fake broker's
// scripted ListDescendants (runtime_test.go) and without a broker.

package converge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	pb "converge.dev/sdk-go/gen/workerv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var rootID = bytes.Repeat([]byte{0xab}, 16)

// subtreeRows are n conf-leaf-like descendants with distinct ids (id byte 15 = i+1).
func subtreeRows(n int) []*pb.Resource {
	rows := make([]*pb.Resource, n)
	for i := range rows {
		id := make([]byte, 16)
		id[15] = byte(i + 1)
		rows[i] = &pb.Resource{Id: id, Kind: "leaf", KindVersion: 1, Name: fmt.Sprintf("c-%d", i), IsReady: true, Phase: "Ready"}
	}
	return rows
}

// rollupTask is a ROLLUP task of kind "tree" on root rootID.
func rollupTask(lease string, epoch int64, spec string, r *pb.RollupRequest) *pb.WorkStreamServerMsg {
	r.Root = &pb.Resource{Id: rootID, Kind: "tree", KindVersion: 1, Name: "root", Spec: []byte(spec)}
	return &pb.WorkStreamServerMsg{Body: &pb.WorkStreamServerMsg_Task{Task: &pb.StageTask{
		Stage: StageRollup, Kind: "tree", KindVersion: 1, Reaction: "rollup", LeaseToken: lease, ClaimEpoch: epoch,
		ResourceId: rootID, Generation: 1, Attempt: 1, Request: &pb.StageTask_RollupReq{RollupReq: r},
	}}}
}

// tree is a rollup that reads per its spec: page 0 reads nothing, page p > 0 pages at p,
// all = true uses ReadDescendants. Its status reports what it saw; gate, when not nil,
// holds the handler until closed.
type tree struct {
	gate    chan struct{}
	started chan struct{}
	lastErr chan error
}

func (*tree) Kind() KindVersion { return KindVersion{"tree", 1} }

func (tr *tree) Work(ctx context.Context, req *ReactionRequest) (*Outcome, error) {
	if tr.started != nil {
		tr.started <- struct{}{}
	}
	if tr.gate != nil {
		<-tr.gate
	}
	var spec struct {
		Page int  `json:"page"`
		All  bool `json:"all"`
	}
	if err := req.Spec(&spec); err != nil {
		return nil, err
	}
	var pages []int
	var names []string
	fail := func(err error) (*Outcome, error) {
		if tr.lastErr != nil {
			tr.lastErr <- err
		}
		return nil, err
	}
	switch {
	case spec.All:
		rows, err := req.ReadDescendants(ctx)
		if err != nil {
			return fail(err)
		}
		for _, r := range rows {
			names = append(names, r.Name)
		}
	case spec.Page > 0:
		p := req.DescendantPages(spec.Page)
		for {
			page, ok, err := p.Next(ctx)
			if err != nil {
				return fail(err)
			}
			if !ok {
				break
			}
			if pages = append(pages, len(page)); len(pages) > 100 {
				return nil, Terminalf("the pages never end")
			}
			for _, r := range page {
				names = append(names, r.Name)
			}
		}
		// Past the end: no more pages, and no further call.
		if _, ok, err := p.Next(ctx); ok || err != nil {
			return nil, Terminalf("Next after the last page: ok=%v err=%v", ok, err)
		}
	}
	return StatusOutcome(map[string]any{
		"sent": len(req.Descendants), "included": req.DescendantsIncluded, "summary": req.Summary,
		"ready": req.Summary.Ready(), "pages": pages, "names": names,
	}), nil
}

func statusOf(t *testing.T, c *pb.StageComplete) map[string]any {
	t.Helper()
	if c.GetErrorMessage() != "" {
		t.Fatalf("the rollup failed: %v", c)
	}
	var st map[string]any
	if err := json.Unmarshal(c.GetStatus(), &st); err != nil {
		t.Fatalf("status %s: %v", c.GetStatus(), err)
	}
	return st
}

func TestARollupThatReadsNothingGetsTheSummaryAndMakesNoCall(t *testing.T) {
	fb, addr := startFakeBroker(t)
	fb.serveSubtree(subtreeRows(5), nil)
	serveFake(t, addr, []Provider{&tree{}})
	s := fb.nextStream(t)
	s.recv(t, false)
	s.send(rollupTask("r1", 3, `{"page":0}`, &pb.RollupRequest{Summary: &pb.RollupSummary{
		Total: 5, ByPhase: map[string]int64{"Ready": 4, "Failed": 1}, ByKind: map[string]int64{"leaf": 5},
		Failed: []*pb.ResourceRef{{Kind: "leaf", Name: "c-3"}}, NotReady: []*pb.ResourceRef{{Kind: "leaf", Name: "c-3"}},
		FailedTotal: 1, NotReadyTotal: 1,
	}}))
	st := statusOf(t, s.recv(t, false).GetComplete())
	want := `{"included":false,"names":null,"pages":null,"ready":4,"sent":0,"summary":{"ByKind":{"leaf":5},` +
		`"ByPhase":{"Failed":1,"Ready":4},"Failed":[{"Kind":"leaf","Name":"c-3"}],"FailedTotal":1,` +
		`"NotReady":[{"Kind":"leaf","Name":"c-3"}],"NotReadyTotal":1,"Total":5}}`
	if got, _ := json.Marshal(st); string(got) != want {
		t.Fatalf("status\n got %s\nwant %s", got, want)
	}
	if n := len(fb.listCalls()); n != 0 {
		t.Fatalf("a rollup that reads nothing made %d ListDescendants calls", n)
	}
}

func TestARollupPagingReadsEveryDescendantOnceWithTheTasksLeaseAndToken(t *testing.T) {
	fb, addr := startFakeBroker(t)
	fb.serveSubtree(subtreeRows(5), nil)
	serveFake(t, "http://"+addr, []Provider{&tree{}}, edit(func(c *Config) { c.Token = "page-token" }))
	s := fb.nextStream(t)
	s.recv(t, false)
	s.send(rollupTask("r2", 9, `{"page":2}`, &pb.RollupRequest{Summary: &pb.RollupSummary{Total: 5}}))
	st := statusOf(t, s.recv(t, false).GetComplete())
	if got, _ := json.Marshal([]any{st["pages"], st["names"]}); string(got) != `[[2,2,1],["c-0","c-1","c-2","c-3","c-4"]]` {
		t.Fatalf("pages and names read: %s", got)
	}
	calls := fb.listCalls()
	if len(calls) != 3 {
		t.Fatalf("want 3 ListDescendants calls (2+2+1), got %d", len(calls))
	}
	for i, c := range calls {
		wantToken := []string{"", "2", "4"}[i]
		if !bytes.Equal(c.GetResourceId(), rootID) || c.GetLeaseToken() != "r2" || c.GetClaimEpoch() != 9 ||
			c.GetPageSize() != 2 || string(c.GetPageToken()) != wantToken {
			t.Fatalf("call %d: %v (want the task's resource id, lease r2, epoch 9, page size 2, token %q)", i, c, wantToken)
		}
	}
	if got := fb.seen(); !slices.Contains(got, "ListDescendants Bearer page-token") || slices.Contains(got, "ListDescendants ") {
		t.Fatalf("ListDescendants must carry the worker's authorization: %q", got)
	}
}

func TestALostLeaseOrAnUnreachableBrokerIsATransientFailure(t *testing.T) {
	for _, tc := range []struct {
		err       error
		leaseGone bool
		want      string
	}{
		{status.Error(codes.FailedPrecondition, "lease r3 is not current"), true,
			"reading descendants failed (the task's lease is gone): lease r3 is not current"},
		{status.Error(codes.Unavailable, "broker shutting down"), false,
			"reading descendants failed (ListDescendants: Unavailable): broker shutting down"},
	} {
		fb, addr := startFakeBroker(t)
		fb.serveSubtree(nil, tc.err)
		tr := &tree{lastErr: make(chan error, 1)}
		serveFake(t, addr, []Provider{tr})
		s := fb.nextStream(t)
		s.recv(t, false)
		s.send(rollupTask("r3", 1, `{"all":true}`, &pb.RollupRequest{Summary: &pb.RollupSummary{Total: 5}}))
		c := s.recv(t, false).GetComplete()
		if c.GetTerminal() || c.GetErrorMessage() != tc.want {
			t.Fatalf("want a transient failure %q, got %v", tc.want, c)
		}
		err := <-tr.lastErr
		var de *DescendantsError
		if !errors.As(err, &de) || de.LeaseGone() != tc.leaseGone || status.Code(err) != status.Code(tc.err) || IsTerminal(err) {
			t.Fatalf("the handler's error %v: want a *DescendantsError, LeaseGone=%v, code %v", err, tc.leaseGone, status.Code(tc.err))
		}
	}
}

func TestTheFullFormHandsTheIncludedRowsOverWithoutACall(t *testing.T) {
	fb, addr := startFakeBroker(t)
	fb.serveSubtree(subtreeRows(5), nil)
	serveFake(t, addr, []Provider{&tree{}})
	s := fb.nextStream(t)
	s.recv(t, false)
	s.send(rollupTask("f1", 1, `{"page":2}`, &pb.RollupRequest{Descendants: subtreeRows(3), DescendantsIncluded: true,
		Summary: &pb.RollupSummary{Total: 3}}))
	st := statusOf(t, s.recv(t, false).GetComplete())
	if got, _ := json.Marshal([]any{st["sent"], st["included"], st["pages"], st["names"]}); string(got) != `[3,true,[3],["c-0","c-1","c-2"]]` {
		t.Fatalf("full form: %s", got)
	}
	s.send(rollupTask("f2", 1, `{"all":true}`, &pb.RollupRequest{Descendants: subtreeRows(2), DescendantsIncluded: true}))
	st = statusOf(t, s.recv(t, false).GetComplete())
	if got, _ := json.Marshal(st["names"]); string(got) != `["c-0","c-1"]` {
		t.Fatalf("ReadDescendants with the full form: %s", got)
	}
	if n := len(fb.listCalls()); n != 0 {
		t.Fatalf("the full form made %d ListDescendants calls", n)
	}
}

func TestARollupKeepsItsConnectionAfterTheStreamDrops(t *testing.T) {
	fb, addr := startFakeBroker(t)
	fb.serveSubtree(subtreeRows(5), nil)
	tr := &tree{gate: make(chan struct{}), started: make(chan struct{}, 1)}
	serveFake(t, addr, []Provider{tr})
	s1 := fb.nextStream(t)
	s1.recv(t, false)
	s1.send(rollupTask("k1", 1, `{"page":2}`, &pb.RollupRequest{}))
	<-tr.started
	close(s1.done) // the session ends while the rollup runs; its connection must outlive it
	s2 := fb.nextStream(t)
	s2.recv(t, false)
	close(tr.gate)
	st := statusOf(t, s2.recv(t, false).GetComplete())
	if got, _ := json.Marshal(st["names"]); string(got) != `["c-0","c-1","c-2","c-3","c-4"]` {
		t.Fatalf("read after the stream dropped: %s", got)
	}
}

func TestPagingWithoutABroker(t *testing.T) {
	ctx := context.Background()
	var rows []Resource
	for i := range 5 {
		rows = append(rows, Resource{Name: fmt.Sprintf("c-%d", i)})
	}
	req := &ReactionRequest{Stage: StageRollup, Subtree: FixedSubtree(rows)}
	p := req.DescendantPages(2)
	var sizes []int
	for {
		page, ok, err := p.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		sizes = append(sizes, len(page))
	}
	if !slices.Equal(sizes, []int{2, 2, 1}) {
		t.Fatalf("fixed pages: %v", sizes)
	}
	all, err := req.ReadDescendants(ctx)
	if err != nil || len(all) != 5 || all[4].Name != "c-4" {
		t.Fatalf("ReadDescendants over a fixed subtree: %v %v", all, err)
	}
	empty := &ReactionRequest{Subtree: FixedSubtree(nil)}
	if page, ok, err := empty.DescendantPages(0).Next(ctx); !ok || err != nil || len(page) != 0 {
		t.Fatalf("an empty subtree is one empty page: %v %v %v", page, ok, err)
	}
	if _, err := (&ReactionRequest{Stage: StageWork}).ReadDescendants(ctx); !IsTerminal(err) ||
		!strings.Contains(err.Error(), "no subtree") {
		t.Fatalf("a request without a subtree must fail terminally: %v", err)
	}
	// ExecuteTask has no broker: a summary-form rollup that pages fails terminally, naming why.
	c := ExecuteTask(ctx, []Provider{&tree{}}, rollupTask("x", 1, `{"page":2}`, &pb.RollupRequest{}).GetTask(), ProviderConfig{})
	if !c.GetTerminal() || !strings.Contains(c.GetErrorMessage(), "no subtree") {
		t.Fatalf("ExecuteTask paging: %v", c)
	}
}
