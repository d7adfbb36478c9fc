// End to end: a worker given two brokers keeps working when the first one dies.

package e2e

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	converge "converge.dev/sdk-go"
)

// A broker-only converge (ROLE=broker) is the first address and the combined converge the
// second; both share one database. Resources become Ready through the first; after it is
// SIGKILLed, new ones become Ready through the second without touching the worker.
func TestAWorkerWithTwoBrokersKeepsWorkingWhenTheFirstDies(t *testing.T) {
	s := startServer(t)
	s.applyManifest(leafManifest("go-failover", 30))
	first := startBroker(t, s)
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	startWorker(t, s, "go-failover", []converge.Provider{greeter("go-failover")},
		converge.WithBrokerAddr(first.Broker, s.Broker), converge.WithLogger(logger))
	openedOn := func(addr string) bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `msg="work stream open"`) && strings.HasSuffix(l, " broker="+addr) {
				return true
			}
		}
		return false
	}

	for i := 0; i < 3; i++ {
		s.apply("go-failover", fmt.Sprintf("before-%d", i), map[string]any{"greeting": "hi"})
	}
	for i := 0; i < 3; i++ {
		s.waitResource("go-failover", fmt.Sprintf("before-%d", i), "Ready", phaseIs("Ready"))
	}
	if !openedOn(first.Broker) || openedOn(s.Broker) {
		t.Fatalf("the worker must be on the first broker:\n%s", logs.String())
	}

	first.kill() // SIGKILL: the worker's stream just breaks
	for i := 0; i < 3; i++ {
		s.apply("go-failover", fmt.Sprintf("after-%d", i), map[string]any{"greeting": "hey"})
	}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("after-%d", i)
		r := s.waitResource("go-failover", name, "Ready", phaseIs("Ready"))
		if msg := r["status"].(map[string]any)["message"]; msg != "hey, "+name+"!" {
			t.Fatalf("status: %v", r["status"])
		}
	}
	if !openedOn(s.Broker) {
		t.Fatalf("served through the second broker:\n%s", logs.String())
	}
}
