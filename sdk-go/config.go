package converge

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Defaults of the worker configuration (the same as the Rust SDK's).
const (
	DefaultMaxParallel    = 16
	DefaultDrainTimeout   = 50 * time.Second
	DefaultHeartbeatEvery = 5 * time.Second
	DefaultReadinessPoll  = 2 * time.Second
	DefaultReconnectMin   = 1 * time.Second
	DefaultReconnectMax   = ReconnectCap
)

// ReconnectCap is the longest wait between reconnect (or config-prime) attempts, jitter
// included, and the most Config.ReconnectMax may be: a broker that comes back, or another
// broker of the list, is found within seconds rather than after a long sleep.
const ReconnectCap = 5 * time.Second

// maxParallelLimit bounds MaxParallel: it travels as a uint32 and sizes a semaphore.
const maxParallelLimit = 1 << 20

// The message size limit (GRPC_MAX_MESSAGE_BYTES): the default and the accepted range are
// the broker's. The ceiling leaves room for a compose result of about a million small
// children (~280 MB); the floor is gRPC's own default receive limit.
const (
	DefaultMaxMessageBytes = 64 << 20
	MaxMessageBytesFloor   = 4 << 20
	MaxMessageBytesCeiling = 512 << 20
)

// The values of GRPC_COMPRESSION / Config.Compression.
const (
	// CompressionNone sends plain frames (the default): cheapest on a local network.
	CompressionNone = "none"
	// CompressionGzip gzips what the worker sends; the broker then answers in gzip too.
	CompressionGzip = "gzip"
)

// Config is how a worker connects and how much work it takes.
type Config struct {
	// BrokerAddrs are the brokers (BROKER_ADDR, comma-separated), dialled in order: the
	// worker moves on to the next on a connect failure and whenever a stream ends, wrapping
	// around. Each is https://host:port (TLS, server name = that entry's host),
	// http://host:port or host:port (h2c); TLS and plaintext entries cannot be mixed. A
	// host name with several DNS records is tried record by record at each connect
	// (grpc-go's dns resolver and pick_first).
	BrokerAddrs []string
	// MaxParallel is the most tasks run at once (WORKER_MAX_PARALLEL, default 16).
	MaxParallel int
	// DrainTimeout is how long shutdown waits for in-flight work (WORKER_DRAIN_TIMEOUT,
	// default 50s).
	DrainTimeout time.Duration
	// Kinds, when non-nil, serves only these kinds of the providers (WORKER_KINDS).
	Kinds []string
	// WorkerName is an advisory display name (WORKER_NAME, default <hostname>-<pid>).
	WorkerName string
	// HeartbeatEvery is the interval of the coalesced heartbeat of running tasks (5s).
	HeartbeatEvery time.Duration
	// ReadinessPoll is the interval of the Ready poll (2s).
	ReadinessPoll time.Duration
	// ReconnectMin is the first reconnect (and config-prime) backoff (1s); it doubles after
	// each failed round of the broker list up to ReconnectMax, and every wait is jittered
	// ±25 %.
	ReconnectMin time.Duration
	// ReconnectMax is the reconnect backoff ceiling (5s); at most ReconnectCap, which no
	// jittered wait exceeds either.
	ReconnectMax time.Duration
	// Token is the bearer token sent as `authorization: Bearer <token>` metadata on
	// WorkStream, GetProviderConfig and ListDescendants (WORKER_TOKEN). It is never logged, and the
	// Config's String form hides it.
	Token string
	// TokenFile is a file holding the token, whitespace-trimmed and re-read at every
	// (re)connect so that a rotated token is picked up (WORKER_TOKEN_FILE). Exclusive with
	// Token.
	TokenFile string
	// CAFile holds the PEM roots trusted for an https:// broker (BROKER_CA_FILE; default:
	// the system roots).
	CAFile string
	// CertFile is a PEM client certificate (chain) for mutual TLS (WORKER_CERT_FILE); it
	// needs KeyFile. Both are re-read at every connect.
	CertFile string
	// KeyFile is CertFile's PEM private key (WORKER_KEY_FILE).
	KeyFile string
	// MaxMessageBytes is the largest message sent or accepted, decompressed
	// (GRPC_MAX_MESSAGE_BYTES, 4 MiB to 512 MiB, default 64 MiB). Raise it together with
	// the broker's for compose results past 64 MiB. Zero means the default.
	MaxMessageBytes int
	// Compression is CompressionGzip to gzip what the worker sends (the broker answers in
	// kind) or CompressionNone (GRPC_COMPRESSION, default none; "" means none).
	Compression string
}

// String shows the Config with the token hidden, so that printing or logging it (with
// %v or %+v) never leaks the secret.
func (c Config) String() string {
	type plain Config // drops the methods, so Sprintf does not recurse into String
	p := plain(c)
	if p.Token != "" {
		p.Token = "***"
	}
	return fmt.Sprintf("%+v", p)
}

// GoString is String for %#v.
func (c Config) GoString() string { return "converge.Config" + c.String() }

// NewConfig is a Config with every default and the given broker addresses (one, or
// several to fail over along).
func NewConfig(brokerAddrs ...string) Config {
	return Config{
		BrokerAddrs:    append([]string(nil), brokerAddrs...),
		MaxParallel:    DefaultMaxParallel,
		DrainTimeout:   DefaultDrainTimeout,
		WorkerName:     defaultWorkerName(),
		HeartbeatEvery: DefaultHeartbeatEvery,
		ReadinessPoll:  DefaultReadinessPoll,
		ReconnectMin:   DefaultReconnectMin,
		ReconnectMax:   DefaultReconnectMax,

		MaxMessageBytes: DefaultMaxMessageBytes,
		Compression:     CompressionNone,
	}
}

// ConfigFromEnv reads BROKER_ADDR (required: one broker or a comma-separated list, all TLS
// or all plaintext), WORKER_MAX_PARALLEL, WORKER_DRAIN_TIMEOUT,
// WORKER_KINDS, WORKER_NAME, WORKER_TOKEN or WORKER_TOKEN_FILE, BROKER_CA_FILE,
// WORKER_CERT_FILE + WORKER_KEY_FILE, GRPC_MAX_MESSAGE_BYTES and GRPC_COMPRESSION from the
// process environment. A malformed value is a
// *ConfigError naming the variable, never a silent default; the token and TLS files are
// read once here so that a mistake fails the start instead of every connect.
func ConfigFromEnv() (Config, error) {
	return ConfigFromLookup(os.LookupEnv)
}

// ConfigFromLookup is ConfigFromEnv reading variables through lookup (for tests and
// embedders with their own configuration source).
func ConfigFromLookup(lookup func(string) (string, bool)) (Config, error) {
	// An empty variable counts as unset, as in a shell `VAR= cmd`.
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		if !ok || strings.TrimSpace(v) == "" {
			return "", false
		}
		return v, true
	}
	addr, ok := get("BROKER_ADDR")
	if !ok {
		return Config{}, &ConfigError{Var: "BROKER_ADDR"}
	}
	addrs, err := parseBrokerAddrs("BROKER_ADDR", addr)
	if err != nil {
		return Config{}, err
	}
	cfg := NewConfig(addrs...)
	if v, ok := get("WORKER_MAX_PARALLEL"); ok {
		n, err := parseMaxParallel("WORKER_MAX_PARALLEL", v)
		if err != nil {
			return Config{}, err
		}
		cfg.MaxParallel = n
	}
	if v, ok := get("WORKER_DRAIN_TIMEOUT"); ok {
		d, reason := ParseDuration(v)
		if reason != nil {
			return Config{}, invalid("WORKER_DRAIN_TIMEOUT", v, reason.Error())
		}
		cfg.DrainTimeout = d
	}
	if v, ok := get("WORKER_KINDS"); ok {
		var kinds []string
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) == 0 {
			return Config{}, invalid("WORKER_KINDS", v, "expected a comma-separated list of kinds")
		}
		cfg.Kinds = kinds
	}
	if v, ok := get("WORKER_NAME"); ok {
		cfg.WorkerName = strings.TrimSpace(v)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"WORKER_TOKEN", &cfg.Token}, {"WORKER_TOKEN_FILE", &cfg.TokenFile}, {"BROKER_CA_FILE", &cfg.CAFile},
		{"WORKER_CERT_FILE", &cfg.CertFile}, {"WORKER_KEY_FILE", &cfg.KeyFile},
	} {
		if v, ok := get(f.name); ok {
			*f.dst = strings.TrimSpace(v)
		}
	}
	if v, ok := get("GRPC_MAX_MESSAGE_BYTES"); ok {
		n, err := parseMaxMessageBytes("GRPC_MAX_MESSAGE_BYTES", v)
		if err != nil {
			return Config{}, err
		}
		cfg.MaxMessageBytes = n
	}
	if v, ok := get("GRPC_COMPRESSION"); ok {
		c := strings.ToLower(strings.TrimSpace(v))
		if c == "identity" {
			c = CompressionNone
		}
		if err := checkCompression("GRPC_COMPRESSION", c); err != nil {
			return Config{}, err
		}
		cfg.Compression = c
	}
	if err := cfg.checkTransport(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// validate checks the values the runtime relies on (positive intervals, a usable address,
// readable token and TLS files).
func (c Config) validate() error {
	if len(c.BrokerAddrs) == 0 {
		return invalid("BrokerAddrs", "[]", "needs at least one broker address")
	}
	shown := strings.Join(c.BrokerAddrs, ",")
	for i, a := range c.BrokerAddrs {
		if reason := targetProblem(a); reason != "" {
			return invalid("BrokerAddrs", shown, entryReason(i, len(c.BrokerAddrs), a, reason))
		}
	}
	if err := checkOneScheme("BrokerAddrs", shown, c.BrokerAddrs); err != nil {
		return err
	}
	if err := c.checkTransport(); err != nil {
		return err
	}
	if c.MaxParallel < 1 || c.MaxParallel > maxParallelLimit {
		return invalid("MaxParallel", strconv.Itoa(c.MaxParallel), fmt.Sprintf("must be between 1 and %d", maxParallelLimit))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"HeartbeatEvery", c.HeartbeatEvery}, {"ReadinessPoll", c.ReadinessPoll}, {"ReconnectMin", c.ReconnectMin}} {
		if f.d <= 0 {
			return invalid(f.name, f.d.String(), "must be positive")
		}
	}
	if c.ReconnectMax < c.ReconnectMin {
		return invalid("ReconnectMax", c.ReconnectMax.String(), "must not be below ReconnectMin")
	}
	if c.ReconnectMax > ReconnectCap {
		return invalid("ReconnectMax", c.ReconnectMax.String(), fmt.Sprintf(
			"must not exceed %s, so an outage is noticed to be over within seconds", ReconnectCap))
	}
	if c.DrainTimeout < 0 {
		return invalid("DrainTimeout", c.DrainTimeout.String(), "must not be negative")
	}
	if c.MaxMessageBytes != 0 {
		if _, err := parseMaxMessageBytes("MaxMessageBytes", strconv.Itoa(c.MaxMessageBytes)); err != nil {
			return err
		}
	}
	if c.Compression == "" {
		return nil
	}
	return checkCompression("Compression", c.Compression)
}

// maxMessageBytes is MaxMessageBytes, or the default when it is zero.
func (c Config) maxMessageBytes() int {
	if c.MaxMessageBytes == 0 {
		return DefaultMaxMessageBytes
	}
	return c.MaxMessageBytes
}

// parseMaxMessageBytes reads a whole number of bytes in the broker's accepted range.
func parseMaxMessageBytes(name, v string) (int, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, invalid(name, v, "expected a whole number of bytes (e.g. 536870912 for 512 MiB)")
	}
	if n < MaxMessageBytesFloor || n > MaxMessageBytesCeiling {
		return 0, invalid(name, v, fmt.Sprintf("must be within %d..=%d (4 MiB to 512 MiB)", MaxMessageBytesFloor, MaxMessageBytesCeiling))
	}
	return int(n), nil
}

func checkCompression(name, v string) error {
	if v != CompressionNone && v != CompressionGzip {
		return invalid(name, v, "expected gzip or none")
	}
	return nil
}

func parseMaxParallel(name, v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, invalid(name, v, "expected a positive integer")
	}
	if n < 1 || n > maxParallelLimit {
		return 0, invalid(name, v, fmt.Sprintf("must be between 1 and %d", maxParallelLimit))
	}
	return n, nil
}

// addrForms is the hint of every malformed broker address.
const addrForms = "expected https://host:port, http://host:port or host:port, e.g. http://127.0.0.1:9090"

// dialTarget turns a broker address into a gRPC target (host:port). It accepts
// https://host:port (TLS), http://host:port (the Rust SDK's spelling of h2c) and a bare
// host:port (the conformance contract's).
func dialTarget(name, addr string) (string, error) {
	if reason := targetProblem(addr); reason != "" {
		return "", invalid(name, addr, reason)
	}
	return stripScheme(addr), nil
}

// stripScheme is addr without its http:// or https:// and a trailing slash.
func stripScheme(addr string) string {
	rest := strings.TrimSpace(addr)
	switch {
	case strings.HasPrefix(rest, "http://"):
		rest = strings.TrimSuffix(strings.TrimPrefix(rest, "http://"), "/")
	case strings.HasPrefix(rest, "https://"):
		rest = strings.TrimSuffix(strings.TrimPrefix(rest, "https://"), "/")
	}
	return rest
}

// targetProblem says why addr is not a usable broker address ("" when it is).
func targetProblem(addr string) string {
	rest := stripScheme(addr)
	if strings.Contains(rest, "://") {
		return addrForms
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return addrForms
	}
	if host == "" {
		return "missing host"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "port must be a number between 1 and 65535"
	}
	return ""
}

// parseBrokerAddrs splits a comma-separated broker list (BROKER_ADDR) into its addresses,
// in order; a bare host:port becomes http://host:port (plaintext h2c). An empty entry is an
// error rather than skipped (a:1,,b:1 usually means a templated address came out empty),
// and TLS and plaintext entries cannot be mixed: one set of TLS files and one token policy
// serve the whole list.
func parseBrokerAddrs(name, raw string) ([]string, error) {
	raw = strings.TrimSpace(raw)
	entries := strings.Split(raw, ",")
	addrs := make([]string, 0, len(entries))
	for i, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			return nil, invalid(name, raw, entryReason(i, len(entries), e,
				"is empty: separate broker addresses with single commas"))
		}
		if !strings.Contains(e, "://") {
			e = "http://" + e
		}
		if reason := targetProblem(e); reason != "" {
			return nil, invalid(name, raw, entryReason(i, len(entries), e, reason))
		}
		addrs = append(addrs, e)
	}
	if err := checkOneScheme(name, raw, addrs); err != nil {
		return nil, err
	}
	return addrs, nil
}

// entryReason is a list entry's problem, numbered (and quoted) when the list has more than
// one entry.
func entryReason(i, n int, entry, reason string) string {
	if n == 1 {
		return reason
	}
	where := fmt.Sprintf("entry %d of %d", i+1, n)
	if entry != "" {
		where += fmt.Sprintf(" (%q)", entry)
	}
	return where + ": " + reason
}

// checkOneScheme refuses a list that mixes TLS and plaintext brokers (a failover would
// silently change the connection's protection).
func checkOneScheme(name, shown string, addrs []string) error {
	tls := 0
	for _, a := range addrs {
		if isTLSAddr(a) {
			tls++
		}
	}
	if tls != 0 && tls != len(addrs) {
		return invalid(name, shown,
			"mixes https:// (TLS) and plaintext (http:// or bare host:port) brokers: use one scheme for every entry")
	}
	return nil
}

// isTLSAddr reports whether one broker address is dialled over TLS.
func isTLSAddr(addr string) bool {
	return strings.HasPrefix(strings.TrimSpace(addr), "https://")
}

// ParseDuration parses the duration spelling shared by converge's configuration: a
// non-negative number with an optional unit ms, s (the default), m or h — e.g. 500ms, 30s,
// 2m, 7.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	num, unit := s, "s"
	if i >= 0 {
		num, unit = s[:i], s[i:]
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("%q is not a duration (e.g. 30s, 500ms, 2m)", s)
	}
	var secs float64
	switch unit {
	case "ms":
		secs = n / 1000
	case "s":
		secs = n
	case "m":
		secs = n * 60
	case "h":
		secs = n * 3600
	default:
		return 0, fmt.Errorf("%q has an unknown unit %q (use ms, s, m or h)", s, unit)
	}
	if secs < 0 || secs > 1e9 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// defaultWorkerName is <hostname>-<pid>, the default display name of a worker.
func defaultWorkerName() string {
	host := strings.TrimSpace(os.Getenv("HOSTNAME"))
	if host == "" {
		if h, err := os.Hostname(); err == nil {
			host = strings.TrimSpace(h)
		}
	}
	if host == "" {
		host = "worker"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
