// Command conformance-worker serves every conformance kind of conformance/KINDS.md with
// the Go SDK, so the language-neutral suite can run its scenarios against the Go form.
//
// Environment: the standard worker variables (BROKER_ADDR, WORKER_MAX_PARALLEL,
// WORKER_NAME, WORKER_DRAIN_TIMEOUT, ...), CONFORMANCE_FORM (default "go") and
// CONFORMANCE_LOG (the JSON-lines event log; none when unset). Exits 0 after draining on
// SIGTERM/SIGINT.
package main

import (
	"fmt"
	"os"

	converge "converge.dev/sdk-go"
)

func main() {
	form := os.Getenv("CONFORMANCE_FORM")
	if form == "" {
		form = "go"
	}
	events, err := openEventLog(os.Getenv("CONFORMANCE_LOG"), form)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance-worker:", err)
		os.Exit(1)
	}
	defer events.close()
	if err := converge.RunWorker(providers(form, events)); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-worker:", err)
		os.Exit(1)
	}
}
