//! The exec provider config: what to run for a kind, read from the *effective* provider
//! config of each task (kind default deep-merged with the resource's override).
//!
//! ```json
//! {"program": "python3", "args": ["handler.py"], "env": {"K": "V"},
//!  "settings": {...}, "timeout_secs": 30, "ready": true}
//! ```

use std::{collections::BTreeMap, time::Duration};

use serde::Deserialize;
use serde_json::Value;

/// One kind's exec config.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecConfig {
    /// The program to run (a path, or a name looked up in `PATH`).
    pub program: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment for the process (on top of `PATH` and `HOME`; nothing else of the
    /// worker's environment is passed on).
    pub env: BTreeMap<String, String>,
    /// Opaque settings handed to the program as the request's `settings`.
    pub settings: Option<Value>,
    /// Wall-clock limit per run in seconds; absent or 0 = none (the task deadline applies).
    pub timeout_secs: Option<f64>,
    /// `false` makes the kind unready on this worker (read from the default config only).
    pub ready: Option<bool>,
}

impl ExecConfig {
    /// Reads a config from JSON; `Null` (no config at all) is the empty config. A field of
    /// the wrong type or an unknown field is an error naming it, so a typo such as
    /// `"programm"` is reported instead of silently running nothing.
    pub fn from_value(v: &Value) -> Result<Self, String> {
        if v.is_null() {
            return Ok(Self::default());
        }
        let cfg = Self::deserialize(v).map_err(|e| format!("invalid exec config: {e}"))?;
        if let Some(t) = cfg.timeout_secs
            && !(t.is_finite() && t >= 0.0)
        {
            return Err(format!(
                "invalid exec config: timeout_secs must be a non-negative number, got {t}"
            ));
        }
        if let Some(k) = cfg
            .env
            .keys()
            .find(|k| k.is_empty() || k.contains(['=', '\0']))
        {
            return Err(format!("invalid exec config: env name {k:?} is not usable"));
        }
        Ok(cfg)
    }

    /// The configured program, if it names one.
    pub fn program(&self) -> Option<&str> {
        self.program.as_deref().filter(|p| !p.trim().is_empty())
    }

    /// The per-run time limit, if any.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout_secs
            .filter(|t| *t > 0.0)
            .map(|t| Duration::try_from_secs_f64(t).unwrap_or(Duration::MAX))
    }

    /// Whether a kind whose *default* config is this one can take tasks: a program is named
    /// and `ready` is not `false`.
    pub fn is_ready(&self) -> bool {
        self.program().is_some() && self.ready != Some(false)
    }
}
