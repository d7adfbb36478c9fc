// The broker secured: converge serves both listeners over TLS (a CA and a 127.0.0.1
// certificate made in the test) with an AUTH_FILE; the Go worker connects over https://
// with BROKER_CA_FILE and a worker token and reconciles a resource, while a worker with a
// wrong token is refused (Unauthenticated) and gets no work. With TLS_CLIENT_CA_FILE, a
// worker identified only by its client certificate's SPIFFE ID does the same.

package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	converge "converge.dev/sdk-go"
	"converge.dev/sdk-go/internal/testcerts"
)

func newToken(t *testing.T) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "cvg_" + base64.RawURLEncoding.EncodeToString(b[:])
}

func sha256Hex(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// startEnvWorker serves providers with a Config read from these variables (plus
// BROKER_ADDR and fast timings), logging into logs.
func startEnvWorker(t *testing.T, s *server, vars map[string]string, logs *lockedBuffer, providers []converge.Provider) *runningWorker {
	t.Helper()
	vars["BROKER_ADDR"] = s.Broker
	cfg, err := converge.ConfigFromLookup(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatalf("worker config: %v", err)
	}
	cfg.ReconnectMin, cfg.ReconnectMax = 100*time.Millisecond, time.Second
	cfg.ReadinessPoll, cfg.HeartbeatEvery, cfg.DrainTimeout = 200*time.Millisecond, time.Second, 5*time.Second
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return startWorker(t, s, vars["WORKER_NAME"], providers, converge.WithConfig(cfg), converge.WithLogger(log))
}

const (
	secureKind = "go-secure"
	spiffeID   = "spiffe://converge.test/worker/m"
)

// secured is a converge with TLS and an AUTH_FILE, and what a worker needs to reach it.
type secured struct {
	*server
	dir         string
	ca          *testcerts.CA
	caFile      string
	workerToken string
}

// startSecured starts converge with TLS and an AUTH_FILE holding an admin, a token worker
// and a SPIFFE worker for secureKind; with clientCA the broker also requires client
// certificates from the test CA.
func startSecured(t *testing.T, clientCA bool) *secured {
	t.Helper()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "converge e2e CA")
	cert, key := ca.Issue(t, testcerts.Leaf{CommonName: "converge", Hosts: []string{"127.0.0.1", "localhost"}})
	admin, worker := newToken(t), newToken(t)
	principals, err := json.Marshal(map[string]any{"principals": []any{
		map[string]any{"name": "ops", "role": "admin", "token_sha256": sha256Hex(admin)},
		map[string]any{"name": "w", "role": "worker", "token_sha256": sha256Hex(worker), "kinds": []string{secureKind}},
		map[string]any{"name": "m", "role": "worker", "spiffe_id": spiffeID, "kinds": []string{secureKind}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	caFile := testcerts.Write(t, dir, "ca.pem", ca.PEM)
	env := []string{
		"TLS_CERT_FILE=" + testcerts.Write(t, dir, "server.pem", cert),
		"TLS_KEY_FILE=" + testcerts.Write(t, dir, "server-key.pem", key),
		"AUTH_FILE=" + testcerts.Write(t, dir, "auth.json", principals),
	}
	if clientCA {
		env = append(env, "TLS_CLIENT_CA_FILE="+caFile)
	}
	s := startServerWith(t, serverOptions{env: env, caPEM: ca.PEM, token: admin})
	return &secured{server: s, dir: dir, ca: ca, caFile: caFile, workerToken: worker}
}

func TestWorkerOverTLSWithATokenAndAWrongTokenGetsNothing(t *testing.T) {
	const kind = secureKind
	sec := startSecured(t, false)
	s, dir, caFile, worker := sec.server, sec.dir, sec.caFile, sec.workerToken
	if code, body := s.doAs("", "GET", "/api/v1/resources", nil); code != 401 {
		t.Fatalf("the API must want a token: %d %s", code, body)
	}
	s.applyManifest(leafManifest(kind, 30))
	s.apply(kind, "secure", map[string]any{"greeting": "hi"})

	// A wrong token: the broker answers Unauthenticated, the SDK logs it and retries, and
	// nothing reaches the resource.
	wrongToken := newToken(t)
	wrongLogs := &lockedBuffer{}
	wrong := startEnvWorker(t, s, map[string]string{
		"BROKER_CA_FILE": caFile, "WORKER_TOKEN": wrongToken, "WORKER_NAME": "wrong-token",
	}, wrongLogs, []converge.Provider{greeter(kind)})
	poll(t, waitFor, "the wrong token's Unauthenticated", func() (bool, string) {
		l := wrongLogs.String()
		return strings.Contains(l, "Unauthenticated"), l
	})
	wrong.stop(t)
	if strings.Contains(wrongLogs.String(), wrongToken) {
		t.Fatal("the worker logged its token")
	}
	if r := s.get(kind, "secure"); r["phase"] == "Ready" || (r["status"] != nil && len(r["status"].(map[string]any)) != 0) {
		t.Fatalf("a worker with a wrong token must get no work: %v", r)
	}

	// The right token, from a file as a deployment mounts it.
	startEnvWorker(t, s, map[string]string{
		"BROKER_CA_FILE":    caFile,
		"WORKER_TOKEN_FILE": testcerts.Write(t, dir, "token", []byte(worker+"\n")),
		"WORKER_NAME":       "right-token",
	}, &lockedBuffer{}, []converge.Provider{greeter(kind)})
	r := s.waitResource(kind, "secure", "Ready", phaseIs("Ready"))
	if msg := r["status"].(map[string]any)["message"]; msg != "hi, secure!" {
		t.Fatalf("status: %v", r["status"])
	}
}

func TestWorkerOverMTLSIdentifiedByItsSPIFFEID(t *testing.T) {
	sec := startSecured(t, true)
	sec.applyManifest(leafManifest(secureKind, 30))
	sec.apply(secureKind, "mutual", map[string]any{"greeting": "hello"})
	cert, key := sec.ca.Issue(t, testcerts.Leaf{CommonName: "m", URIs: []string{spiffeID}, Client: true})
	startEnvWorker(t, sec.server, map[string]string{
		"BROKER_CA_FILE":   sec.caFile,
		"WORKER_CERT_FILE": testcerts.Write(t, sec.dir, "client.pem", cert),
		"WORKER_KEY_FILE":  testcerts.Write(t, sec.dir, "client-key.pem", key),
		"WORKER_NAME":      "mtls",
	}, &lockedBuffer{}, []converge.Provider{greeter(secureKind)})
	r := sec.waitResource(secureKind, "mutual", "Ready", phaseIs("Ready"))
	if msg := r["status"].(map[string]any)["message"]; msg != "hello, mutual!" {
		t.Fatalf("status: %v", r["status"])
	}
}
