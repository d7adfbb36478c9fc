// Package e2e runs Go providers in-process against the real converge binary on a fresh
// PostgreSQL database per test, over real gRPC.
//
// It needs CONVERGE_TEST_DATABASE_URL (an admin URL to database postgres; tests are
// skipped with a message when it is unset) and the converge binary (CONVERGE_BIN, default
// ${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}/debug/converge).
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	converge "converge.dev/sdk-go"
	_ "github.com/lib/pq"
)

// waitFor is the default deadline of every poll.
const waitFor = 30 * time.Second

func convergeBin(t *testing.T) string {
	if b := os.Getenv("CONVERGE_BIN"); b != "" {
		return b
	}
	target := os.Getenv("CARGO_TARGET_DIR")
	if target == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("cannot find the converge binary: no CONVERGE_BIN and no home dir: %v", err)
		}
		target = filepath.Join(home, ".cache", "converge-target")
	}
	return filepath.Join(target, "debug", "converge")
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// server is a running `converge serve` on its own fresh database.
type server struct {
	t      *testing.T
	HTTP   string
	Broker string
	dbURL  string
	cmd    *exec.Cmd
	exited chan struct{}
	client *http.Client
	// token is sent as a bearer token on every API call when set.
	token string
}

// serverOptions secure a server: extra environment (TLS_CERT_FILE, AUTH_FILE, ...), the
// PEM roots its certificate chains to (the URLs are then https://), and the API token.
type serverOptions struct {
	env   []string
	caPEM []byte
	token string
}

// freshDatabase creates a uniquely named database and returns its URL; it is dropped at
// the end of the test.
func freshDatabase(t *testing.T) string {
	admin := os.Getenv("CONVERGE_TEST_DATABASE_URL")
	if admin == "" {
		const how = `(eval "$(scripts/pg-test-cluster.sh start DIR)" provides one)`
		if os.Getenv("CONVERGE_E2E_REQUIRED") == "1" {
			t.Fatal("CONVERGE_TEST_DATABASE_URL is unset but CONVERGE_E2E_REQUIRED=1 " + how)
		}
		t.Skip("CONVERGE_TEST_DATABASE_URL is unset: skipping the end-to-end test " + how)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "sdkgo_" + hex.EncodeToString(suffix[:])
	db, err := sql.Open("postgres", withSSLModeDefault(admin))
	if err != nil {
		t.Fatalf("open admin database: %v", err)
	}
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		db.Close()
		t.Fatalf("CREATE DATABASE %s: %v", name, err)
	}
	t.Cleanup(func() {
		defer db.Close()
		if _, err := db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Logf("DROP DATABASE %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("CONVERGE_TEST_DATABASE_URL is not a URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// withSSLModeDefault adds sslmode=disable unless the URL sets it: lib/pq defaults to
// require, while the throwaway test clusters (like libpq's default, prefer) run without TLS.
func withSSLModeDefault(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// startServer starts converge with fast retry settings and waits for /readyz.
func startServer(t *testing.T) *server {
	t.Helper()
	return startServerWith(t, serverOptions{})
}

// startServerWith is startServer with TLS, an AUTH_FILE or other settings.
func startServerWith(t *testing.T, o serverOptions) *server {
	t.Helper()
	dbURL := freshDatabase(t)
	bin := convergeBin(t)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the converge binary %s is missing (set CONVERGE_BIN or build it): %v", bin, err)
	}
	hp, gp := freePort(t), freePort(t)
	cmd := exec.Command(bin, "serve")
	logLevel := os.Getenv("TEST_LOG_LEVEL")
	if logLevel == "" {
		logLevel = "warn"
	}
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"DATABASE_URL=" + dbURL,
		fmt.Sprintf("LISTEN_ADDR=127.0.0.1:%d", hp),
		fmt.Sprintf("BROKER_LISTEN_ADDR=127.0.0.1:%d", gp),
		"RETRY_BASE=200ms",
		"RETRY_MAX=1s",
		"SHUTDOWN_DRAIN=2s",
		"DB_MAX_CONNECTIONS=10",
		"LOG_LEVEL=" + logLevel,
	}
	cmd.Env = append(cmd.Env, o.env...)
	scheme, client := "http", http.DefaultClient
	if o.caPEM != nil {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(o.caPEM) {
			t.Fatal("the test CA does not parse")
		}
		scheme = "https"
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	}
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start converge: %v", err)
	}
	s := &server{
		t:      t,
		HTTP:   fmt.Sprintf("%s://127.0.0.1:%d", scheme, hp),
		Broker: fmt.Sprintf("%s://127.0.0.1:%d", scheme, gp),
		dbURL:  dbURL,
		cmd:    cmd,
		exited: make(chan struct{}),
		client: client,
		token:  o.token,
	}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("converge output:\n%s", logs.String())
		}
	})
	poll(t, waitFor, "converge /readyz", func() (bool, string) {
		select {
		case <-s.exited:
			t.Fatalf("converge exited during start-up:\n%s", logs.String())
		default:
		}
		r, err := s.client.Get(s.HTTP + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		r.Body.Close()
		return r.StatusCode == 200, r.Status
	})
	return s
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// poll calls check until it reports true or the deadline passes (then the test fails with
// the last observation). It is the only way these tests wait.
func poll(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, obs := check()
		if ok {
			return
		}
		last = obs
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last observation: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *server) do(method, path string, body any) (int, []byte) {
	s.t.Helper()
	return s.doAs(s.token, method, path, body)
}

// doAs is do with this bearer token (none when empty).
func (s *server) doAs(token, method, path string, body any) (int, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.HTTP+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// applyManifest PUTs a kind manifest and fails the test unless it is accepted.
func (s *server) applyManifest(m map[string]any) {
	s.t.Helper()
	code, body := s.do("PUT", fmt.Sprintf("/api/v1/kinds/%s/manifest", m["kind"]), m)
	if code/100 != 2 {
		s.t.Fatalf("manifest %v refused: %d %s", m["kind"], code, body)
	}
}

// apply POSTs a resource and fails the test unless it is accepted.
func (s *server) apply(kind, name string, spec any) {
	s.t.Helper()
	code, body := s.do("POST", "/api/v1/resources",
		map[string]any{"kind": kind, "kind_version": 1, "name": name, "spec": spec})
	if code/100 != 2 {
		s.t.Fatalf("apply %s/%s refused: %d %s", kind, name, code, body)
	}
}

// get returns the resource document, or nil on 404.
func (s *server) get(kind, name string) map[string]any {
	s.t.Helper()
	code, body := s.do("GET", fmt.Sprintf("/api/v1/resources/%s/%s", kind, name), nil)
	if code == 404 {
		return nil
	}
	if code != 200 {
		s.t.Fatalf("GET %s/%s: %d %s", kind, name, code, body)
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		s.t.Fatalf("GET %s/%s: %v", kind, name, err)
	}
	return v
}

// waitResource polls the resource until pred holds and returns it.
func (s *server) waitResource(kind, name, what string, pred func(map[string]any) bool) map[string]any {
	s.t.Helper()
	var r map[string]any
	poll(s.t, waitFor, fmt.Sprintf("%s/%s %s", kind, name, what), func() (bool, string) {
		r = s.get(kind, name)
		b, _ := json.Marshal(r)
		return r != nil && pred(r), string(b)
	})
	return r
}

func phaseIs(p string) func(map[string]any) bool {
	return func(r map[string]any) bool { return r["phase"] == p }
}

// leafManifest is a kind with one `work` reaction emitting status and conditions.
func leafManifest(kind string, deadlineSecs int) map[string]any {
	return map[string]any{
		"kind":               kind,
		"kind_version":       1,
		"description":        "Go SDK end-to-end test kind",
		"task_deadline_secs": deadlineSecs,
		"reactions": []any{
			map[string]any{"name": "work", "trigger": "specChange", "emits": []any{"status", "conditions"}},
		},
	}
}

// runningWorker is a Go worker served in-process.
type runningWorker struct {
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
}

// startWorker serves providers against s until stop (or the end of the test).
func startWorker(t *testing.T, s *server, name string, providers []converge.Provider, opts ...converge.Option) *runningWorker {
	t.Helper()
	cfg := converge.NewConfig(s.Broker)
	cfg.WorkerName = name
	cfg.ReconnectMin = 100 * time.Millisecond
	cfg.ReconnectMax = time.Second
	cfg.ReadinessPoll = 200 * time.Millisecond
	cfg.HeartbeatEvery = time.Second
	cfg.DrainTimeout = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	w := &runningWorker{cancel: cancel, done: make(chan error, 1)}
	go func() {
		w.done <- converge.Serve(ctx, providers,
			append([]converge.Option{converge.WithConfig(cfg), converge.WithLogger(testLogger(t))}, opts...)...)
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop shuts the worker down (drain) and waits for Serve to return.
func (w *runningWorker) stop(t *testing.T) {
	w.stopOnce.Do(func() {
		w.cancel()
		select {
		case err := <-w.done:
			if err != nil {
				t.Errorf("Serve returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Serve did not return within 30s of shutdown")
		}
	})
}

// testLogger sends worker logs to the test's output at TEST_LOG_LEVEL (default warn).
func testLogger(t *testing.T) *slog.Logger {
	level := slog.LevelWarn
	if v := os.Getenv("TEST_LOG_LEVEL"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// brokerProcess is a broker-only `converge serve` (ROLE=broker) on a server's database: a
// second broker pod, with its probes on its own HEALTH_ADDR.
type brokerProcess struct {
	Broker string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startBroker starts a broker-only converge on s's database and waits for its /readyz.
func startBroker(t *testing.T, s *server) *brokerProcess {
	t.Helper()
	hp, gp := freePort(t), freePort(t)
	cmd := exec.Command(convergeBin(t), "serve")
	logLevel := os.Getenv("TEST_LOG_LEVEL")
	if logLevel == "" {
		logLevel = "warn"
	}
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"ROLE=broker",
		"DATABASE_URL=" + s.dbURL,
		fmt.Sprintf("HEALTH_ADDR=127.0.0.1:%d", hp),
		fmt.Sprintf("BROKER_LISTEN_ADDR=127.0.0.1:%d", gp),
		"SHUTDOWN_DRAIN=2s",
		"DB_MAX_CONNECTIONS=10",
		"LOG_LEVEL=" + logLevel,
	}
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the broker: %v", err)
	}
	b := &brokerProcess{Broker: fmt.Sprintf("http://127.0.0.1:%d", gp), cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() {
		b.kill()
		if t.Failed() {
			t.Logf("broker output:\n%s", logs.String())
		}
	})
	poll(t, waitFor, "broker /readyz", func() (bool, string) {
		select {
		case <-b.exited:
			t.Fatalf("the broker exited during start-up:\n%s", logs.String())
		default:
		}
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", hp))
		if err != nil {
			return false, err.Error()
		}
		r.Body.Close()
		return r.StatusCode == 200, r.Status
	})
	return b
}

// kill SIGKILLs the broker (a crash: no drain) and reaps it.
func (b *brokerProcess) kill() {
	_ = b.cmd.Process.Kill()
	<-b.exited
}
