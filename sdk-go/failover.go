// Which broker of BROKER_ADDR to dial next, and how long to wait first.
//
// The list is walked in order, wrapping around, the way gRPC's connection backoff treats an
// address list: an attempt that gets no stream moves straight on to the next address, and
// only once every address has failed in a row does the worker sleep (one jittered backoff
// per failed round, doubling to the ceiling). A stream that opened and later ended also
// moves on to the next address, after one jittered wait so that the workers of a broker
// that died or drained do not all land on the next one in the same instant.
//
// The backoff starts over when a stream opens after failures (a failover, or the one
// broker back from an outage) and when an ended stream had outlived the current backoff. A
// broker that keeps accepting streams and dropping them at once therefore still escalates.
// The same rules as the Rust and Python SDKs.

package converge

import "time"

// failover is the dialling position in the broker list and the backoff shared across it.
type failover struct {
	n       int
	current int
	// failures counts attempts in a row that got no stream (or no config) since the last
	// success.
	failures int
	bo       *backoff
}

func newFailover(n int, min, max time.Duration) *failover {
	return &failover{n: max1(n), bo: newBackoff(min, max)}
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// succeeded records a stream (or a config pull) that succeeded on the current address.
// After failures this is a recovery, so the backoff starts over: a stream lost soon after
// a failover is retried within ReconnectMin, not after the escalated wait of the outage.
func (f *failover) succeeded() {
	if f.failures > 0 {
		f.failures = 0
		f.bo.reset()
	}
}

// failed records an attempt on the current address that failed before a stream opened (no
// connection, refused, bad credentials): it moves on to the next address and returns how
// long to wait before dialling it, zero while this round still has untried addresses.
func (f *failover) failed() time.Duration {
	f.failures++
	f.advance()
	if f.failures%f.n == 0 {
		return f.bo.next()
	}
	return 0
}

// ended records a stream that had opened on the current address and ended after lived: it
// moves on to the next address and returns the jittered wait before dialling it.
func (f *failover) ended(lived time.Duration) time.Duration {
	f.succeeded()
	if lived > f.bo.current {
		f.bo.reset()
	}
	f.advance()
	return f.bo.next()
}

func (f *failover) advance() { f.current = (f.current + 1) % f.n }
