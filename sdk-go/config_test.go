package converge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"converge.dev/sdk-go/internal/testcerts"
)

func parseEnv(vars map[string]string) (Config, error) {
	return ConfigFromLookup(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
}

func TestConfigDefaultsWhenOnlyTheBrokerIsSet(t *testing.T) {
	cfg, err := parseEnv(map[string]string{"BROKER_ADDR": "http://127.0.0.1:9090"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.BrokerAddrs, "|") != "http://127.0.0.1:9090" || cfg.MaxParallel != 16 || cfg.DrainTimeout != 50*time.Second ||
		cfg.Kinds != nil || cfg.HeartbeatEvery != 5*time.Second || cfg.ReadinessPoll != 2*time.Second ||
		cfg.ReconnectMin != time.Second || cfg.ReconnectMax != 5*time.Second || ReconnectCap != 5*time.Second {
		t.Fatalf("defaults: %+v", cfg)
	}
	if !strings.HasSuffix(cfg.WorkerName, fmt.Sprintf("-%d", os.Getpid())) {
		t.Fatalf("default worker name %q lacks the pid", cfg.WorkerName)
	}
}

func TestConfigReadsEveryVariable(t *testing.T) {
	cfg, err := parseEnv(map[string]string{
		"BROKER_ADDR":          "broker:9090",
		"WORKER_MAX_PARALLEL":  "64",
		"WORKER_DRAIN_TIMEOUT": "2m",
		"WORKER_KINDS":         "hello, vpc ,,",
		"WORKER_NAME":          " w-1 ",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxParallel != 64 || cfg.DrainTimeout != 2*time.Minute || strings.Join(cfg.Kinds, "|") != "hello|vpc" || cfg.WorkerName != "w-1" {
		t.Fatalf("parsed: %+v", cfg)
	}
	for v, want := range map[string]time.Duration{"500ms": 500 * time.Millisecond, "50s": 50 * time.Second, "7": 7 * time.Second, "1.5h": 90 * time.Minute} {
		cfg, err := parseEnv(map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_DRAIN_TIMEOUT": v})
		if err != nil || cfg.DrainTimeout != want {
			t.Errorf("WORKER_DRAIN_TIMEOUT=%s: %v %v", v, cfg.DrainTimeout, err)
		}
	}
	// An empty variable counts as unset.
	cfg, err = parseEnv(map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_MAX_PARALLEL": "  "})
	if err != nil || cfg.MaxParallel != DefaultMaxParallel {
		t.Fatalf("empty WORKER_MAX_PARALLEL: %v %v", cfg.MaxParallel, err)
	}
}

func TestTransportVariablesSetTheMessageLimitAndCompression(t *testing.T) {
	cfg, err := parseEnv(map[string]string{"BROKER_ADDR": "http://b:1"})
	if err != nil || cfg.MaxMessageBytes != 64<<20 || cfg.Compression != CompressionNone {
		t.Fatalf("defaults: %d %q %v", cfg.MaxMessageBytes, cfg.Compression, err)
	}
	cfg, err = parseEnv(map[string]string{"BROKER_ADDR": "http://b:1", "GRPC_MAX_MESSAGE_BYTES": "536870912", "GRPC_COMPRESSION": " GZIP "})
	if err != nil || cfg.MaxMessageBytes != 512<<20 || cfg.Compression != CompressionGzip {
		t.Fatalf("set: %d %q %v", cfg.MaxMessageBytes, cfg.Compression, err)
	}
	// A Config written as a literal leaves both at their zero values, which mean the defaults.
	lit := Config{BrokerAddrs: []string{"http://b:1"}, MaxParallel: 1, HeartbeatEvery: 1, ReadinessPoll: 1, ReconnectMin: 1, ReconnectMax: 1}
	if err := lit.validate(); err != nil || lit.maxMessageBytes() != DefaultMaxMessageBytes {
		t.Fatalf("zero values: %d %v", lit.maxMessageBytes(), err)
	}
	lit.MaxMessageBytes = MaxMessageBytesCeiling + 1
	var ce *ConfigError
	if err := lit.validate(); !errors.As(err, &ce) || ce.Var != "MaxMessageBytes" {
		t.Fatalf("over the ceiling: %v", err)
	}
}

func TestMalformedConfigIsAnErrorNamingTheVariable(t *testing.T) {
	cases := []struct {
		vars map[string]string
		bad  string
	}{
		{map[string]string{}, "BROKER_ADDR"},
		{map[string]string{"BROKER_ADDR": "https://b"}, "BROKER_ADDR"},
		{map[string]string{"BROKER_ADDR": "https://b:1/path"}, "BROKER_ADDR"},
		{map[string]string{"BROKER_ADDR": "grpc://b:9090"}, "BROKER_ADDR"},
		{map[string]string{"BROKER_ADDR": "http://"}, "BROKER_ADDR"},
		{map[string]string{"BROKER_ADDR": "b:notaport"}, "BROKER_ADDR"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_MAX_PARALLEL": "lots"}, "WORKER_MAX_PARALLEL"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_MAX_PARALLEL": "0"}, "WORKER_MAX_PARALLEL"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_MAX_PARALLEL": "-3"}, "WORKER_MAX_PARALLEL"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_MAX_PARALLEL": "99999999"}, "WORKER_MAX_PARALLEL"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_DRAIN_TIMEOUT": "soon"}, "WORKER_DRAIN_TIMEOUT"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_DRAIN_TIMEOUT": "5d"}, "WORKER_DRAIN_TIMEOUT"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_DRAIN_TIMEOUT": "-1s"}, "WORKER_DRAIN_TIMEOUT"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_KINDS": " , ,"}, "WORKER_KINDS"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "GRPC_MAX_MESSAGE_BYTES": "536870913"}, "GRPC_MAX_MESSAGE_BYTES"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "GRPC_MAX_MESSAGE_BYTES": "1024"}, "GRPC_MAX_MESSAGE_BYTES"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "GRPC_MAX_MESSAGE_BYTES": "64MiB"}, "GRPC_MAX_MESSAGE_BYTES"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "GRPC_COMPRESSION": "zstd"}, "GRPC_COMPRESSION"},
	}
	for _, c := range cases {
		_, err := parseEnv(c.vars)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != c.bad {
			t.Errorf("%v: want a ConfigError naming %s, got %v", c.vars, c.bad, err)
			continue
		}
		if !strings.Contains(err.Error(), c.bad) {
			t.Errorf("message %q does not name %s", err, c.bad)
		}
	}
}

func TestServeRejectsAnUnusableSetup(t *testing.T) {
	p := ProviderFunc(KindVersion{"a", 1}, nil)
	cases := []struct {
		name      string
		providers []Provider
		opts      []Option
	}{
		{"no providers", nil, nil},
		{"version 0", []Provider{ProviderFunc(KindVersion{"a", 0}, nil)}, nil},
		{"duplicate", []Provider{p, p}, nil},
		{"unknown WORKER_KINDS", []Provider{p}, []Option{WithKinds("b")}},
		{"zero parallelism", []Provider{p}, []Option{WithMaxParallel(0)}},
		{"backoff upside down", []Provider{p}, []Option{WithReconnectBackoff(time.Second, time.Millisecond)}},
	}
	for _, c := range cases {
		opts := append([]Option{WithConfig(NewConfig("127.0.0.1:1"))}, c.opts...)
		if err := Serve(t.Context(), c.providers, opts...); err == nil {
			t.Errorf("%s: Serve accepted it", c.name)
		}
	}
	err := Serve(t.Context(), []Provider{p}, WithEnvLookup(func(string) (string, bool) { return "", false }))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Var != "BROKER_ADDR" {
		t.Errorf("Serve without BROKER_ADDR: %v", err)
	}
}

const secret = "tok-3f9a2b7c"

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	return testcerts.Write(t, t.TempDir(), name, []byte(data))
}

func TestHTTPSAddressSelectsTLSWithTheHostAsServerName(t *testing.T) {
	cfg, err := parseEnv(map[string]string{"BROKER_ADDR": "https://broker.example:9443/"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.useTLS() {
		t.Fatal("https:// must dial TLS")
	}
	if target, err := dialTarget("BROKER_ADDR", cfg.BrokerAddrs[0]); err != nil || target != "broker.example:9443" {
		t.Fatalf("target %q %v", target, err)
	}
	tc, err := cfg.tlsConfig(cfg.BrokerAddrs[0])
	if err != nil {
		t.Fatal(err)
	}
	if tc.ServerName != "broker.example" || tc.RootCAs != nil || len(tc.Certificates) != 0 {
		t.Fatalf("TLS config without files: server name %q, roots %v, certs %d", tc.ServerName, tc.RootCAs, len(tc.Certificates))
	}
	for _, addr := range []string{"http://b:1", "b:1"} {
		if cfg, _ := parseEnv(map[string]string{"BROKER_ADDR": addr}); cfg.useTLS() {
			t.Errorf("%s must dial h2c", addr)
		}
	}
}

func TestTokenIsReadFromTheEnvironmentOrAFileReReadEachTime(t *testing.T) {
	cfg, err := parseEnv(map[string]string{"BROKER_ADDR": "http://b:1"})
	if tok, err2 := cfg.readToken(); err != nil || err2 != nil || tok != "" {
		t.Fatalf("no token configured: %q %v %v", tok, err, err2)
	}
	cfg, err = parseEnv(map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_TOKEN": " " + secret + "\n"})
	if tok, _ := cfg.readToken(); err != nil || tok != secret {
		t.Fatalf("WORKER_TOKEN: %q %v", tok, err)
	}
	f := writeFile(t, "token", "\n  "+secret+"  \n")
	cfg, err = parseEnv(map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_TOKEN_FILE": f})
	if tok, _ := cfg.readToken(); err != nil || tok != secret {
		t.Fatalf("WORKER_TOKEN_FILE: %q %v", tok, err)
	}
	if err := os.WriteFile(f, []byte("rotated-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := cfg.readToken(); err != nil || tok != "rotated-token" {
		t.Fatalf("a rotated token file must be re-read: %q %v", tok, err)
	}
	md, err := bearer(secret).GetRequestMetadata(t.Context())
	if err != nil || md["authorization"] != "Bearer "+secret || len(md) != 1 {
		t.Fatalf("bearer metadata: %v %v", md, err)
	}
	if bearer(secret).RequireTransportSecurity() {
		t.Fatal("a token must also work over h2c (the broker accepts it on loopback)")
	}
}

func TestTheTokenNeverShows(t *testing.T) {
	cfg, err := parseEnv(map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_TOKEN": secret})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), cfg.String(), fmt.Sprint(bearer(secret))} {
		if strings.Contains(s, secret) {
			t.Fatalf("the token shows in %q", s)
		}
	}
	if !strings.Contains(cfg.String(), "Token:***") || !strings.Contains(cfg.String(), "BrokerAddrs:[http://b:1]") {
		t.Fatalf("String must show the fields with the token hidden: %s", cfg)
	}
	bad := "two words-" + secret
	_, err = parseEnv(map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_TOKEN": bad})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Var != "WORKER_TOKEN" || strings.Contains(err.Error(), secret) {
		t.Fatalf("a token with a space: %v", err)
	}
	_, err = parseEnv(map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_TOKEN_FILE": writeFile(t, "t", bad)})
	if !errors.As(err, &ce) || ce.Var != "WORKER_TOKEN_FILE" || strings.Contains(err.Error(), secret) {
		t.Fatalf("a token file with a space: %v", err)
	}
}

func TestTLSFilesAreLoaded(t *testing.T) {
	ca := testcerts.NewCA(t, "test CA")
	certPEM, keyPEM := ca.Issue(t, testcerts.Leaf{CommonName: "w", Client: true})
	dir := t.TempDir()
	cfg, err := parseEnv(map[string]string{
		"BROKER_ADDR":      "https://127.0.0.1:9443",
		"BROKER_CA_FILE":   testcerts.Write(t, dir, "ca.pem", ca.PEM),
		"WORKER_CERT_FILE": testcerts.Write(t, dir, "cert.pem", certPEM),
		"WORKER_KEY_FILE":  testcerts.Write(t, dir, "key.pem", keyPEM),
	})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := cfg.tlsConfig(cfg.BrokerAddrs[0])
	if err != nil {
		t.Fatal(err)
	}
	if tc.ServerName != "127.0.0.1" || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.Certificates[0].Leaf.Subject.CommonName != "w" {
		t.Fatalf("TLS config: %+v", tc)
	}
}

func TestBadTokenAndTLSSettingsNameTheVariable(t *testing.T) {
	ca := testcerts.NewCA(t, "test CA")
	certPEM, keyPEM := ca.Issue(t, testcerts.Leaf{CommonName: "w", Client: true})
	_, otherKey := ca.Issue(t, testcerts.Leaf{CommonName: "other", Client: true})
	dir := t.TempDir()
	caF := testcerts.Write(t, dir, "ca.pem", ca.PEM)
	cert := testcerts.Write(t, dir, "cert.pem", certPEM)
	key := testcerts.Write(t, dir, "key.pem", keyPEM)
	other := testcerts.Write(t, dir, "other-key.pem", otherKey)
	notPEM := testcerts.Write(t, dir, "notpem", []byte("hello\n"))
	fakePEM := testcerts.Write(t, dir, "fake.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	token := testcerts.Write(t, dir, "token", []byte(secret))
	missing := filepath.Join(dir, "missing")
	https := "https://b:1"
	cases := []struct {
		vars      map[string]string
		bad, says string
	}{
		{map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_TOKEN": "x", "WORKER_TOKEN_FILE": token}, "WORKER_TOKEN", "WORKER_TOKEN and WORKER_TOKEN_FILE are both set"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_TOKEN_FILE": missing}, "WORKER_TOKEN_FILE", "cannot read the file"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "WORKER_TOKEN_FILE": testcerts.Write(t, dir, "empty", []byte(" \n"))}, "WORKER_TOKEN_FILE", "is empty"},
		{map[string]string{"BROKER_ADDR": "http://b:1", "BROKER_CA_FILE": caF}, "BROKER_CA_FILE", "is plaintext; TLS files need BROKER_ADDR=https://"},
		{map[string]string{"BROKER_ADDR": "b:1", "WORKER_CERT_FILE": cert, "WORKER_KEY_FILE": key}, "WORKER_CERT_FILE", "is plaintext; TLS files need BROKER_ADDR=https://"},
		{map[string]string{"BROKER_ADDR": https, "WORKER_CERT_FILE": cert}, "WORKER_KEY_FILE", "WORKER_CERT_FILE is set but WORKER_KEY_FILE is not"},
		{map[string]string{"BROKER_ADDR": https, "WORKER_KEY_FILE": key}, "WORKER_CERT_FILE", "WORKER_KEY_FILE is set but WORKER_CERT_FILE is not"},
		{map[string]string{"BROKER_ADDR": https, "BROKER_CA_FILE": missing}, "BROKER_CA_FILE", "cannot read the file"},
		{map[string]string{"BROKER_ADDR": https, "BROKER_CA_FILE": notPEM}, "BROKER_CA_FILE", "no PEM CERTIFICATE"},
		{map[string]string{"BROKER_ADDR": https, "BROKER_CA_FILE": fakePEM}, "BROKER_CA_FILE", "could be parsed"},
		{map[string]string{"BROKER_ADDR": https, "WORKER_CERT_FILE": cert, "WORKER_KEY_FILE": notPEM}, "WORKER_KEY_FILE", "no PEM PRIVATE KEY"},
		{map[string]string{"BROKER_ADDR": https, "WORKER_CERT_FILE": key, "WORKER_KEY_FILE": key}, "WORKER_CERT_FILE", "no PEM CERTIFICATE"},
		{map[string]string{"BROKER_ADDR": https, "WORKER_CERT_FILE": cert, "WORKER_KEY_FILE": other}, "WORKER_CERT_FILE", "not a usable key pair"},
	}
	for _, c := range cases {
		_, err := parseEnv(c.vars)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != c.bad || !strings.Contains(err.Error(), c.bad) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: want an error naming %s saying %q, got %v", c.vars, c.bad, c.says, err)
		}
	}
	// Serve checks a Config built in code the same way.
	cfg := NewConfig("http://b:1")
	cfg.Token, cfg.TokenFile = "x", token
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "WORKER_TOKEN and WORKER_TOKEN_FILE") {
		t.Fatalf("validate: %v", err)
	}
}
