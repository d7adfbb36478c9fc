"""Errors of the SDK: a handler's failure, a bad configuration, an unusable registry.

A handler raises `TerminalError` to stop retries until the resource's spec changes and
`TransientError` to be retried with backoff. Any other exception is a transient failure whose
message is the exception's text (the equivalent of a panic in the Rust SDK).
"""

from __future__ import annotations


class HandlerError(Exception):
    """A handler failure; `terminal` says whether a retry can help."""

    terminal: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class TransientError(HandlerError):
    """A failure worth retrying (a flaky dependency, a timeout, a conflict)."""

    terminal = False


class TerminalError(HandlerError):
    """A failure no retry can fix (an invalid spec, a missing permission)."""

    terminal = True


class ConfigError(ValueError):
    """A worker configuration value that is missing or malformed; names the variable."""

    def __init__(self, var: str, message: str) -> None:
        super().__init__(message)
        self.var = var

    @classmethod
    def missing(cls, var: str) -> ConfigError:
        """A required variable is not set."""
        return cls(var, f"{var} is required but not set")

    @classmethod
    def invalid(cls, var: str, value: object, reason: str) -> ConfigError:
        """A variable is set to something that cannot be used."""
        return cls(var, f"{var}={str(value)!r} is invalid: {reason}")


class RegistryError(ValueError):
    """The providers cannot be served (none, a bad version, a duplicate pair, ...)."""
