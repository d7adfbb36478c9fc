package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConformanceWorkerProgram runs the real conformance-worker binary (built here) against
// the suite's own manifests, checks a few kinds end to end, and that SIGTERM exits 0.
func TestConformanceWorkerProgram(t *testing.T) {
	s := startServer(t)
	kinds, _ := filepath.Glob("../../conformance/kinds/*.json")
	if len(kinds) == 0 {
		t.Fatal("no conformance manifests under ../../conformance/kinds")
	}
	for _, path := range kinds {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		s.applyManifest(m)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "conformance-worker")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/conformance-worker").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	logPath := filepath.Join(dir, "events.log")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "BROKER_ADDR="+strings.TrimPrefix(s.Broker, "http://"),
		"WORKER_NAME=go-conformance", "CONFORMANCE_LOG="+logPath, "LOG_LEVEL=warn", "WORKER_DRAIN_TIMEOUT=5s")
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("worker output:\n%s", out.String())
		}
	}()

	s.apply("conf-leaf", "l1", map[string]any{"x": 1})
	s.apply("conf-composite", "c1", map[string]any{"children": 2})
	s.apply("conf-slow", "s1", map[string]any{"sleep_ms": 5000})
	s.apply("conf-summary", "p1", map[string]any{"children": 3, "page_size": 2})
	r := s.waitResource("conf-leaf", "l1", "Ready", phaseIs("Ready"))
	if st := r["status"].(map[string]any); st["form"] != "go" || st["echo"].(map[string]any)["x"] != float64(1) {
		t.Fatalf("leaf status: %v", st)
	}
	r = s.waitResource("conf-composite", "c1", "rolled up", func(r map[string]any) bool {
		st, _ := r["status"].(map[string]any)
		return r["phase"] == "Ready" && st["ready"] == float64(2)
	})
	if c := s.get("conf-leaf", "c1-1"); c["spec"].(map[string]any)["upstream_index"] != float64(0) {
		t.Fatalf("value flow: %v", c["spec"])
	}
	r = s.waitResource("conf-summary", "p1", "rolled up by paging", func(r map[string]any) bool {
		st, _ := r["status"].(map[string]any)
		ph, _ := st["by_phase"].(map[string]any)
		return r["phase"] == "Ready" && ph["Ready"] == float64(3)
	})
	if b, _ := json.Marshal(r["status"]); string(b) != `{"by_kind":{"conf-leaf":3},"by_phase":{"Ready":3},"distinct":3,"included":false,"not_ready":0,"pages":2,"read":3,"sent":0,"total":3}` {
		t.Fatalf("conf-summary status: %s", b)
	}
	poll(t, waitFor, "a cancelled event from the slow handler", func() (bool, string) {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), `"kind":"conf-slow","name":"s1","reaction":"work","stage":"STAGE_WORK"`) &&
			strings.Contains(string(b), `"event":"cancelled"`), string(b)
	})

	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("the worker must exit 0 on SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not exit after SIGTERM")
	}
}
