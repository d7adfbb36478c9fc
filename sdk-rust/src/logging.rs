//! `init_logging`: the global `tracing` subscriber, configured from `LOG_LEVEL` / `LOG_FORMAT`.

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use crate::error::LoggingError;

/// Installs a global `tracing` subscriber: `LOG_LEVEL` (default `info`; a level or an
/// `EnvFilter` directive list such as `info,converge_sdk=debug`) and `LOG_FORMAT`
/// (`text`, the default, or `json`). Malformed values are errors, never silent defaults.
/// Text is coloured only when stdout is a terminal (a file or a collector gets it plain).
pub fn init_logging() -> Result<(), LoggingError> {
    let level = std::env::var("LOG_LEVEL")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let format = std::env::var("LOG_FORMAT")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let level = level.unwrap_or_else(|| "info".to_string());
    let filter = EnvFilter::builder()
        .parse(&level)
        .map_err(|source| LoggingError::Level {
            value: level.clone(),
            source,
        })?;
    let registry = tracing_subscriber::registry().with(filter);
    match format.as_deref().map(str::trim) {
        None | Some("text") => registry
            .with(fmt::layer().with_ansi(std::io::stdout().is_terminal()))
            .try_init(),
        Some("json") => registry
            .with(fmt::layer().json().flatten_event(true))
            .try_init(),
        Some(other) => return Err(LoggingError::Format(other.to_string())),
    }
    .map_err(LoggingError::AlreadyInstalled)
}
