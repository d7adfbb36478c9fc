//! Errors of the SDK: a handler's failure, a bad configuration, and the runtime's own errors.

use std::fmt;

/// Why a handler failed. Transient failures are retried with backoff; terminal ones stop
/// retries until the resource's spec changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerError {
    message: String,
    terminal: bool,
}

impl HandlerError {
    /// A failure worth retrying (a flaky dependency, a timeout, a conflict).
    pub fn transient(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            terminal: false,
        }
    }

    /// A failure no retry can fix (an invalid spec, a missing permission).
    pub fn terminal(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            terminal: true,
        }
    }

    /// Whether the failure is terminal.
    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// The failure's message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HandlerError {}

/// A worker configuration value that is missing or malformed. Always names the variable
/// (or field) at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A required variable is not set.
    #[error("{var} is required but not set")]
    Missing {
        /// The variable's name.
        var: String,
    },
    /// A variable is set to something that cannot be used.
    #[error("{var}={value:?} is invalid: {reason}")]
    Invalid {
        /// The variable's (or field's) name.
        var: String,
        /// The offending value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A variable holds bytes that are not UTF-8.
    #[error("{var} is not valid UTF-8")]
    NotUnicode {
        /// The variable's name.
        var: String,
    },
    /// Variables that exclude or need each other are set inconsistently (both token
    /// variables, half of a certificate pair, TLS files with a plaintext address).
    #[error("{message}")]
    Conflict {
        /// One of the variables at fault (the message names all of them).
        var: String,
        /// What is wrong, naming every variable involved.
        message: String,
    },
    /// A secret (the worker token) is unusable. Its value is never part of the error.
    #[error("{var} is invalid: {reason}")]
    InvalidSecret {
        /// The variable's name.
        var: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl ConfigError {
    pub(crate) fn invalid(
        var: impl Into<String>,
        value: impl fmt::Display,
        reason: impl Into<String>,
    ) -> Self {
        Self::Invalid {
            var: var.into(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    /// The name of the variable (or field) at fault.
    pub fn var(&self) -> &str {
        match self {
            Self::Missing { var }
            | Self::Invalid { var, .. }
            | Self::NotUnicode { var }
            | Self::Conflict { var, .. }
            | Self::InvalidSecret { var, .. } => var,
        }
    }
}

/// Why the worker runtime could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The worker configuration is missing or malformed.
    #[error("invalid worker configuration")]
    Config(#[from] ConfigError),
    /// The provider registry cannot be served (empty, a bad version, a duplicate pair...).
    #[error("invalid provider registry: {0}")]
    Registry(String),
}

/// Why [`crate::init_logging`] failed.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// `LOG_LEVEL` is not a valid level or filter directive.
    #[error("LOG_LEVEL={value:?} is invalid")]
    Level {
        /// The offending value.
        value: String,
        /// The parse error.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// `LOG_FORMAT` is neither `json` nor `text`.
    #[error("LOG_FORMAT={0:?} is invalid: expected json or text")]
    Format(String),
    /// A global subscriber is already installed.
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled(#[source] tracing_subscriber::util::TryInitError),
}
