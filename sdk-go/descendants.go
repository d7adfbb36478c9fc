// A rollup's view of the composite's subtree: the RollupSummary every ROLLUP request
// carries, and the paged read of the descendants themselves (WorkerService.ListDescendants),
// which a handler makes only if it asks, so a rollup that needs only counts costs the same
// whatever the size of the subtree.
//
// A kind whose rollup reaction declares "descendants": "full" gets every descendant in the
// request instead (ReactionRequest.Descendants, DescendantsIncluded); the paged read then
// hands those over without a call, so a handler written against the paged read works with
// either form.

package converge

import (
	"context"
	"fmt"
	"sync"
	"time"

	pb "converge.dev/sdk-go/gen/workerv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Page sizes of the paged descendant read.
const (
	// DefaultPageSize is the number of descendants a page holds when the handler asks for
	// 0 (the broker's default too).
	DefaultPageSize = 500
	// MaxPageSize is the largest page the broker returns; a larger request is read as it.
	MaxPageSize = 2000
)

// descendantPageTimeout bounds one ListDescendants call.
const descendantPageTimeout = 30 * time.Second

// RollupSummary describes a composite's live subtree without shipping it: the broker sends
// one with every ROLLUP task, whichever form the kind's rollup declares.
type RollupSummary struct {
	// Total is the number of live descendants.
	Total int64
	// ByPhase counts live descendants per phase (Ready, Reconciling, Degraded, Failed, ...);
	// never nil.
	ByPhase map[string]int64
	// ByKind counts live descendants per kind; never nil.
	ByKind map[string]int64
	// Failed lists the first failed descendants in (kind, name) order, at most 100.
	Failed []ResourceRef
	// NotReady lists the first descendants that are not ready, same order, at most 100.
	NotReady []ResourceRef
	// FailedTotal is how many descendants are failed (Failed may list fewer).
	FailedTotal int64
	// NotReadyTotal is how many descendants are not ready (NotReady may list fewer).
	NotReadyTotal int64
}

// Ready is the number of live descendants that are ready (Total - NotReadyTotal).
func (s *RollupSummary) Ready() int64 { return s.Total - s.NotReadyTotal }

func summaryFromPB(s *pb.RollupSummary) *RollupSummary {
	counts := func(m map[string]int64) map[string]int64 {
		out := make(map[string]int64, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	refs := func(rs []*pb.ResourceRef) []ResourceRef {
		out := make([]ResourceRef, 0, len(rs))
		for _, r := range rs {
			out = append(out, Ref(r.GetKind(), r.GetName()))
		}
		return out
	}
	return &RollupSummary{
		Total:         s.GetTotal(),
		ByPhase:       counts(s.GetByPhase()),
		ByKind:        counts(s.GetByKind()),
		Failed:        refs(s.GetFailed()),
		NotReady:      refs(s.GetNotReady()),
		FailedTotal:   s.GetFailedTotal(),
		NotReadyTotal: s.GetNotReadyTotal(),
	}
}

// Subtree is where [ReactionRequest.DescendantPages] reads a rollup's descendants from: the
// broker the task came from (a ROLLUP task run by the worker runtime), a fixed list
// ([FixedSubtree], for tests), or nowhere (the zero value: any other request).
type Subtree struct {
	fixed  []Resource
	isSet  bool // fixed is in use (it may be empty)
	remote *remoteSubtree
}

// FixedSubtree is a subtree served from descendants in memory, for testing a rollup
// handler that pages without a broker: set req.Subtree = converge.FixedSubtree(rows).
func FixedSubtree(descendants []Resource) Subtree {
	return Subtree{fixed: descendants, isSet: true}
}

// remoteSubtree is a ROLLUP task's lease and the connection it arrived on.
type remoteSubtree struct {
	conn       *brokerConn
	resourceID []byte
	leaseToken string
	claimEpoch int64
}

// subtreeOf is the subtree of a ROLLUP task that arrived on conn (none without one).
func subtreeOf(task *pb.StageTask, conn *brokerConn) Subtree {
	if conn == nil {
		return Subtree{}
	}
	return Subtree{remote: &remoteSubtree{
		conn:       conn,
		resourceID: append([]byte(nil), task.GetResourceId()...),
		leaseToken: task.GetLeaseToken(),
		claimEpoch: task.GetClaimEpoch(),
	}}
}

// brokerConn is one session's connection, shared with the ROLLUP tasks that arrived on it
// so their paged reads go to the same broker with the same credentials (the bearer token
// is a per-RPC credential of the connection).
//
// Guarantees: the connection is closed exactly once, when the session has ended and every
// task holding it has finished; a task keeps reading its pages across a dropped stream (the
// connection reconnects to the same address by itself).
// Assumptions: hold is called by the session while it holds its own reference, so it never
// finds the connection closed.
type brokerConn struct {
	conn   *grpc.ClientConn
	client pb.WorkerServiceClient
	mu     sync.Mutex
	refs   int // the session's reference plus one per running ROLLUP task
}

func newBrokerConn(conn *grpc.ClientConn) *brokerConn {
	return &brokerConn{conn: conn, client: pb.NewWorkerServiceClient(conn), refs: 1}
}

// hold takes a reference; false if the connection is already closed.
func (c *brokerConn) hold() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs == 0 {
		return false
	}
	c.refs++
	return true
}

// release drops a reference, closing the connection with the last one.
func (c *brokerConn) release() {
	c.mu.Lock()
	c.refs--
	last := c.refs == 0
	c.mu.Unlock()
	if last {
		_ = c.conn.Close()
	}
}

// DescendantPages reads a rollup's descendants one page at a time; make one with
// [ReactionRequest.DescendantPages]. It is not safe for concurrent use.
type DescendantPages struct {
	src Subtree
	// included holds the full form's rows, handed over as the one page.
	included    []Resource
	hasIncluded bool
	pageSize    int
	// token is where the next broker page starts; offset the next fixed row.
	token  []byte
	offset int
	done   bool
}

// DescendantPages pages through the composite's live subtree, pageSize descendants a page
// (0 or less means [DefaultPageSize]; more than [MaxPageSize] is read as MaxPageSize).
// With the full form (DescendantsIncluded) the one page is Descendants and no call is made.
// Reading nothing costs nothing: no call is made before the first Next.
func (r *ReactionRequest) DescendantPages(pageSize int) *DescendantPages {
	switch {
	case pageSize <= 0:
		pageSize = DefaultPageSize
	case pageSize > MaxPageSize:
		pageSize = MaxPageSize
	}
	return &DescendantPages{
		src:         r.Subtree,
		included:    r.Descendants,
		hasIncluded: r.DescendantsIncluded,
		pageSize:    pageSize,
	}
}

// Next returns the next page; ok is false once every descendant was returned (every live
// descendant comes exactly once over all pages; a subtree with none yields one empty
// page). Each page is one ListDescendants call on the connection the task arrived on, with
// the task's lease, bounded by ctx and a 30 s timeout. A failed call is a transient error
// (the task is retried), also when the lease is gone because the task ended, was cancelled
// or was taken over (FAILED_PRECONDITION); Next can be called again to retry the same page.
// A request with no subtree (not a ROLLUP task) is a terminal error.
func (p *DescendantPages) Next(ctx context.Context) (page []Resource, ok bool, err error) {
	if p.done {
		return nil, false, nil
	}
	if p.hasIncluded {
		p.done = true
		return p.included, true, nil
	}
	switch {
	case p.src.remote != nil:
		rows, next, err := p.src.remote.page(ctx, p.token, p.pageSize)
		if err != nil {
			return nil, false, err
		}
		p.token, p.done = next, len(next) == 0
		return rows, true, nil
	case p.src.isSet:
		end := min(p.offset+p.pageSize, len(p.src.fixed))
		rows := p.src.fixed[p.offset:end]
		p.offset, p.done = end, end >= len(p.src.fixed)
		return rows, true, nil
	}
	return nil, false, Terminalf("this request has no subtree to page through (not a ROLLUP task; " +
		"in a test, set req.Subtree = converge.FixedSubtree(rows))")
}

// ReadDescendants returns every live descendant: Descendants with the full form
// (DescendantsIncluded), otherwise all pages of [ReactionRequest.DescendantPages] at
// [DefaultPageSize]. Its errors are Next's.
func (r *ReactionRequest) ReadDescendants(ctx context.Context) ([]Resource, error) {
	if r.DescendantsIncluded {
		return r.Descendants, nil
	}
	pages := r.DescendantPages(DefaultPageSize)
	var all []Resource
	for {
		page, ok, err := pages.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			return all, nil
		}
		all = append(all, page...)
	}
}

// page makes one ListDescendants call; next is empty after the last page.
func (s *remoteSubtree) page(ctx context.Context, token []byte, size int) (rows []Resource, next []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, descendantPageTimeout)
	defer cancel()
	resp, err := s.conn.client.ListDescendants(ctx, &pb.ListDescendantsRequest{
		ResourceId: s.resourceID,
		LeaseToken: s.leaseToken,
		ClaimEpoch: s.claimEpoch,
		PageToken:  token,
		PageSize:   uint32(size),
	})
	if err != nil {
		return nil, nil, &DescendantsError{err: err}
	}
	if rows, err = resourcesFromPB(resp.GetDescendants(), "descendant"); err != nil {
		return nil, nil, &DescendantsError{err: err}
	}
	return rows, resp.GetNextPageToken(), nil
}

// DescendantsError is a failed page read (a transient failure: the task is retried). It
// wraps the gRPC status error, so status.Code and errors.Is see through it; LeaseGone
// tells the lease apart from the broker being unreachable.
type DescendantsError struct {
	err error
}

// LeaseGone reports whether the broker refused the read because the task's lease is no
// longer current (FAILED_PRECONDITION): the task ended, was cancelled or was taken over,
// and its result will not be accepted either.
func (e *DescendantsError) LeaseGone() bool { return status.Code(e.err) == codes.FailedPrecondition }

// Error says why the read failed, with the broker's message.
func (e *DescendantsError) Error() string {
	st, isStatus := status.FromError(e.err)
	switch {
	case !isStatus:
		return "reading descendants failed: " + e.err.Error()
	case e.LeaseGone():
		return "reading descendants failed (the task's lease is gone): " + st.Message()
	}
	return fmt.Sprintf("reading descendants failed (ListDescendants: %s): %s", st.Code(), st.Message())
}

// Unwrap exposes the gRPC status error (or the decoding error).
func (e *DescendantsError) Unwrap() error { return e.err }
