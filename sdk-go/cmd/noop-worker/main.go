// Command noop-worker serves one kind (NOOP_KIND, version 1) with a handler that does
// nothing and returns an empty outcome, so a benchmark measures the SDK and the broker
// rather than handler code. It reads the standard worker environment (BROKER_ADDR,
// WORKER_MAX_PARALLEL, ...) and drains on SIGTERM/SIGINT.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	converge "converge.dev/sdk-go"
)

func main() {
	kind := strings.TrimSpace(os.Getenv("NOOP_KIND"))
	if kind == "" {
		fmt.Fprintln(os.Stderr, "noop-worker: NOOP_KIND is required but not set")
		os.Exit(1)
	}
	noop := converge.ProviderFunc(converge.KindVersion{Kind: kind, Version: 1},
		func(context.Context, *converge.ReactionRequest) (*converge.Outcome, error) {
			return nil, nil
		})
	if err := converge.RunWorker([]converge.Provider{noop}); err != nil {
		fmt.Fprintln(os.Stderr, "noop-worker:", err)
		os.Exit(1)
	}
}
