// Package converge is the Go SDK for writing converge providers.
//
// A provider implements [Provider] for one (kind, kind_version) pair. [Serve] (or
// [RunWorker], which also handles SIGTERM/SIGINT) dials the broker's WorkerService,
// subscribes to the providers' kinds and runs the tasks it receives with bounded
// concurrency. The runtime follows the stream rules of the WorkerService contract: it keeps
// every result until the broker acknowledges it and re-sends unacknowledged results after a
// reconnect, sends one coalesced heartbeat of running tasks, reports readiness flips,
// applies provider-config pushes, honours task deadlines and CancelTask, drains on request
// and reconnects with jittered exponential backoff (capped at 5 s), failing over along the
// list of brokers in BROKER_ADDR (Config.BrokerAddrs).
//
// The vocabulary (ReactionRequest, Outcome, Condition, ChildSpec, DepEdge, ...) is the same
// as in the Rust and Python SDKs. A handler returns an error made with [Terminal] to stop
// retries until the spec changes; any other error, and any panic, is a transient failure
// that the control plane retries with backoff.
//
//	type hello struct{}
//
//	func (hello) Kind() converge.KindVersion { return converge.KindVersion{Kind: "hello", Version: 1} }
//
//	func (hello) Work(ctx context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
//		return converge.StatusOutcome(map[string]any{"message": "hello, " + req.Resource.Name}), nil
//	}
//
//	func main() {
//		if err := converge.RunWorker([]converge.Provider{hello{}}); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// A ROLLUP request carries a [RollupSummary] of the composite's subtree; a handler that
// needs the descendants themselves pages through them with
// [ReactionRequest.DescendantPages] or [ReactionRequest.ReadDescendants] (the rows come in
// the request only when the kind's rollup declares "descendants": "full").
//
// The package convergetest runs a provider on a request without a broker.
package converge
