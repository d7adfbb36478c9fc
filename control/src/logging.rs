//! Logging set-up for the binaries: `tracing` with LOG_LEVEL (an EnvFilter directive,
//! default `info`) and LOG_FORMAT (`text` or `json`). Text is coloured only on a terminal:
//! redirected into a file or a log collector it is plain, with no ANSI escapes to strip.

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

/// Installs the global subscriber; an invalid LOG_LEVEL or LOG_FORMAT is an error.
pub fn init() -> anyhow::Result<()> {
    let level = std::env::var("LOG_LEVEL").unwrap_or_else(|_| "info".into());
    let filter = EnvFilter::try_new(format!("{level},sqlx=warn,h2=warn,hyper=warn,tower=warn"))
        .map_err(|e| anyhow::anyhow!("invalid LOG_LEVEL {level:?}: {e}"))?;
    let format = std::env::var("LOG_FORMAT").unwrap_or_else(|_| "text".into());
    let registry = tracing_subscriber::registry().with(filter);
    match format.as_str() {
        "json" => registry
            .with(fmt::layer().json().with_current_span(false))
            .try_init()?,
        "text" => registry
            .with(
                fmt::layer()
                    .with_target(false)
                    .with_ansi(std::io::stdout().is_terminal()),
            )
            .try_init()?,
        other => anyhow::bail!("invalid LOG_FORMAT {other:?}: use text or json"),
    }
    Ok(())
}
