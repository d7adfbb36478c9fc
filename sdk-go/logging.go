package converge

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// LoggerFromEnv builds a slog logger on stderr from LOG_LEVEL (debug, info — the default —,
// warn or error) and LOG_FORMAT (text, the default, or json). Malformed values are errors,
// never silent defaults.
func LoggerFromEnv() (*slog.Logger, error) {
	level := slog.LevelInfo
	if v := strings.TrimSpace(os.Getenv("LOG_LEVEL")); v != "" {
		// Accept a Rust-style directive list such as "info,converge=debug" by its first
		// entry, so one LOG_LEVEL can serve every worker form.
		first := strings.TrimSpace(strings.Split(v, ",")[0])
		if err := level.UnmarshalText([]byte(first)); err != nil {
			return nil, fmt.Errorf("LOG_LEVEL=%q is invalid: expected debug, info, warn or error", v)
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch v := strings.TrimSpace(os.Getenv("LOG_FORMAT")); v {
	case "", "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	default:
		return nil, fmt.Errorf("LOG_FORMAT=%q is invalid: expected json or text", v)
	}
}
