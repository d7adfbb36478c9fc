package converge

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func parseEnv(vars map[string]string) (Config, error) {
	return ConfigFromLookup(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
}

func TestConfigDefaultsWhenOnlyTheBrokerIsSet(t *testing.T) {
	cfg, err := parseEnv(map[string]string{"BROKER_ADDR": "http://127.0.0.1:9090"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BrokerAddr != "http://127.0.0.1:9090" || cfg.MaxParallel != 16 || cfg.DrainTimeout != 50*time.Second ||
		cfg.Kinds != nil || cfg.HeartbeatEvery != 5*time.Second || cfg.ReadinessPoll != 2*time.Second ||
		cfg.ReconnectMin != time.Second || cfg.ReconnectMax != 30*time.Second {
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

func TestMalformedConfigIsAnErrorNamingTheVariable(t *testing.T) {
	cases := []struct {
		vars map[string]string
		bad  string
	}{
		{map[string]string{}, "BROKER_ADDR"},
		{map[string]string{"BROKER_ADDR": "https://b:9090"}, "BROKER_ADDR"},
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
