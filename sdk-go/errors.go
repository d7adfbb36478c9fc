package converge

import (
	"context"
	"errors"
	"fmt"
)

// TerminalError marks a handler failure that no retry can fix (an invalid spec, a missing
// permission): the control plane stops retrying until the resource's spec changes. Make
// one with [Terminal] or [Terminalf]; any other error returned by a handler is transient.
type TerminalError struct {
	err error
}

// Terminal wraps err as a terminal failure. Terminal(nil) is nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &TerminalError{err: err}
}

// Terminalf is Terminal(fmt.Errorf(format, args...)).
func Terminalf(format string, args ...any) error {
	return Terminal(fmt.Errorf(format, args...))
}

// Error is the wrapped error's message (what the control plane records).
func (e *TerminalError) Error() string { return e.err.Error() }

// Unwrap exposes the wrapped error to errors.Is and errors.As.
func (e *TerminalError) Unwrap() error { return e.err }

// IsTerminal reports whether err (or anything it wraps) is a terminal failure.
func IsTerminal(err error) bool {
	var t *TerminalError
	return errors.As(err, &t)
}

// The reasons a [CancelledError] carries: the broker's CancelTask reasons, and
// [CancelShutdown] when the worker stopped before the handler returned.
const (
	// CancelDeleted: the resource was deleted while its task ran.
	CancelDeleted = "deleted"
	// CancelQuarantined: the resource was quarantined while its task ran.
	CancelQuarantined = "quarantined"
	// CancelSuperseded: the resource's spec moved to a newer generation, which runs as a
	// task of its own.
	CancelSuperseded = "superseded"
	// CancelDeadline: the task's deadline passed (the broker's timer or the worker's own).
	CancelDeadline = "deadline"
	// CancelShutdown: the worker stopped before the handler returned.
	CancelShutdown = "shutdown"
)

// CancelledError is why a handler's context ended, as [context.Cause] reports it: the
// broker's CancelTask (Reason is its word), the task deadline (Reason is [CancelDeadline];
// ctx.Err() stays [context.DeadlineExceeded]) or the worker's shutdown. A cancelled task's
// result is never sent.
type CancelledError struct {
	// Reason is one of the Cancel* words (a newer broker may send others).
	Reason string
}

func (e *CancelledError) Error() string { return "task cancelled: " + e.Reason }

// Unwrap makes errors.Is(cause, context.Canceled) hold for a cancellation.
func (e *CancelledError) Unwrap() error {
	if e.Reason == CancelDeadline {
		return context.DeadlineExceeded
	}
	return context.Canceled
}

// CancelReason is the reason ctx was cancelled for (a [CancelledError]'s Reason), or "" when
// ctx is not done or ended for another cause.
func CancelReason(ctx context.Context) string {
	var c *CancelledError
	if errors.As(context.Cause(ctx), &c) {
		return c.Reason
	}
	return ""
}

// ConfigError is a worker configuration value that is missing or malformed. It always names
// the variable (or field) at fault.
type ConfigError struct {
	// Var is the environment variable or Config field at fault.
	Var string
	// Value is the offending value; empty when the variable is missing.
	Value string
	// Reason says what is wrong; empty when the variable is missing.
	Reason string
	// msg, when set, is the whole message: for a mistake the Var=Value form cannot say
	// (two variables that conflict) or must not (a token's value is never shown).
	msg string
}

func (e *ConfigError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	if e.Reason == "" {
		return e.Var + " is required but not set"
	}
	return fmt.Sprintf("%s=%q is invalid: %s", e.Var, e.Value, e.Reason)
}

func invalid(v, value, reason string) *ConfigError {
	return &ConfigError{Var: v, Value: value, Reason: reason}
}
