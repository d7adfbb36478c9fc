package converge

import (
	"log/slog"
	"time"

	"google.golang.org/grpc"
)

// Option adjusts how Serve runs a worker.
type Option func(*options)

type options struct {
	config    *Config
	edits     []func(*Config)
	logger    *slog.Logger
	dialOpts  []grpc.DialOption
	envLookup func(string) (string, bool)
}

// WithConfig uses cfg instead of reading the environment.
func WithConfig(cfg Config) Option {
	return func(o *options) { c := cfg; o.config = &c }
}

// WithBrokerAddr overrides the broker addresses (each https://host:port, http://host:port
// or host:port), dialled in order with failover.
func WithBrokerAddr(addrs ...string) Option {
	return edit(func(c *Config) { c.BrokerAddrs = append([]string(nil), addrs...) })
}

// WithMaxParallel overrides the most tasks run at once.
func WithMaxParallel(n int) Option { return edit(func(c *Config) { c.MaxParallel = n }) }

// WithDrainTimeout overrides how long shutdown waits for in-flight work.
func WithDrainTimeout(d time.Duration) Option {
	return edit(func(c *Config) { c.DrainTimeout = d })
}

// WithWorkerName overrides the advisory display name.
func WithWorkerName(name string) Option { return edit(func(c *Config) { c.WorkerName = name }) }

// WithKinds serves only these kinds of the providers.
func WithKinds(kinds ...string) Option {
	return edit(func(c *Config) { c.Kinds = append([]string(nil), kinds...) })
}

// WithHeartbeatEvery overrides the interval of the coalesced heartbeat.
func WithHeartbeatEvery(d time.Duration) Option {
	return edit(func(c *Config) { c.HeartbeatEvery = d })
}

// WithReadinessPoll overrides the interval of the Ready poll.
func WithReadinessPoll(d time.Duration) Option {
	return edit(func(c *Config) { c.ReadinessPoll = d })
}

// WithReconnectBackoff overrides the reconnect backoff bounds (max at most ReconnectCap).
func WithReconnectBackoff(min, max time.Duration) Option {
	return edit(func(c *Config) { c.ReconnectMin, c.ReconnectMax = min, max })
}

// WithMaxMessageBytes overrides the largest message sent or accepted (4 MiB to 512 MiB).
func WithMaxMessageBytes(n int) Option { return edit(func(c *Config) { c.MaxMessageBytes = n }) }

// WithCompression overrides the compression of sent messages: CompressionGzip or
// CompressionNone.
func WithCompression(c string) Option { return edit(func(cfg *Config) { cfg.Compression = c }) }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithDialOptions adds gRPC dial options (interceptors, keepalive, ...). They apply after
// the ones the Config implies (TLS for an https:// address, h2c otherwise; the bearer
// token), so transport credentials given here replace those.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

// WithEnvLookup reads the worker environment through lookup instead of os.LookupEnv.
func WithEnvLookup(lookup func(string) (string, bool)) Option {
	return func(o *options) { o.envLookup = lookup }
}

func edit(f func(*Config)) Option {
	return func(o *options) { o.edits = append(o.edits, f) }
}

// resolve builds the final Config: the explicit one or the environment, then the edits.
func (o *options) resolve() (Config, error) {
	var cfg Config
	if o.config != nil {
		cfg = *o.config
	} else {
		lookup := o.envLookup
		if lookup == nil {
			lookup = osLookupEnv
		}
		var err error
		if cfg, err = ConfigFromLookup(lookup); err != nil {
			return Config{}, err
		}
	}
	for _, f := range o.edits {
		f(&cfg)
	}
	return cfg, cfg.validate()
}
