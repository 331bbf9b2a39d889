//! Per-job defaults: time budgets (`timeout`, `grace`, how long a wait
//! lasts) and how much of a job's output is held (`ring_size`,
//! `max_output`), with the two value forms these keys take in a file:
//! seconds (`30s`, `500ms`, or a number) and sizes (`4m`, or bytes).

use serde::{Deserialize, Serialize};

use super::Config;
use crate::error::{Error, Result};
use crate::job::parse_size;
use crate::model::RunnerChoice;

/// Default foreground budget (seconds) when a manager can promote.
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;
/// Default wait (seconds) for readiness or a job's end, when a caller names
/// none: `berth wait`, `berth run -d --ready-…`, the API's wait routes and
/// MCP's wait and readiness checks.
pub const DEFAULT_WAIT_SECS: f64 = 60.0;
/// Default grace between SIGTERM and SIGKILL (seconds).
pub const DEFAULT_GRACE_SECS: f64 = 5.0;
/// How long a spare container (`warm_pool`) waits for a job.
pub const DEFAULT_WARM_IDLE_SECS: f64 = 120.0;
/// Most spare containers per job shape.
pub const MAX_WARM_POOL: usize = 8;

pub(super) fn default_warm_idle() -> f64 {
    DEFAULT_WARM_IDLE_SECS
}

/// `warm_pool`: 0 (none) to [`MAX_WARM_POOL`].
pub(super) fn warm_pool(what: &'static str, v: usize) -> Result<usize> {
    match v {
        0..=MAX_WARM_POOL => Ok(v),
        _ => Err(Error::InvalidValue {
            what,
            input: v.to_string(),
            message: format!("at most {MAX_WARM_POOL} spare containers per job shape"),
        }),
    }
}
/// The smallest per-job output cap accepted (below it a job's own tail would not fit).
pub const MIN_MAX_OUTPUT_BYTES: u64 = 1024 * 1024;
pub use crate::store::DEFAULT_MAX_OUTPUT_BYTES;

/// A size in a config file: a byte count or a string like `4m`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SizeValue {
    Bytes(u64),
    Text(String),
}

impl SizeValue {
    pub(super) fn bytes(&self) -> Result<u64> {
        match self {
            SizeValue::Bytes(b) => Ok(*b),
            SizeValue::Text(t) => parse_size(t),
        }
    }
}

/// A size as a config file takes it back: `2g`, `512m`, `64k`, else bytes.
pub(super) fn size_text(n: u64) -> String {
    for (shift, unit) in [(40, 't'), (30, 'g'), (20, 'm'), (10, 'k')] {
        if n != 0 && n.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// A budget: zero seconds would end every job at once.
pub(super) fn positive(what: &'static str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(Error::InvalidValue {
            what,
            input: v.to_string(),
            message: "must be a positive number of seconds".into(),
        })
    }
}

/// `grace`: zero is allowed (SIGKILL straight after SIGTERM).
pub(super) fn grace_secs(key: &'static str, v: f64) -> Result<f64> {
    super::table::zero_or_more(key, v, "zero or more seconds")
}

/// `max_output`: below [`MIN_MAX_OUTPUT_BYTES`] a job's tail would not fit.
pub(super) fn max_output(key: &'static str, v: SizeValue) -> Result<u64> {
    let bytes = v.bytes()?;
    if bytes < MIN_MAX_OUTPUT_BYTES {
        return Err(Error::InvalidValue {
            what: key,
            input: bytes.to_string(),
            message: "must be at least 1m".into(),
        });
    }
    Ok(bytes)
}

impl Config {
    pub fn with_grace_secs(mut self, s: f64) -> Self {
        self.grace_secs = s;
        self
    }
    pub fn with_ring_bytes(mut self, b: usize) -> Self {
        self.ring_bytes = b;
        self
    }
    pub fn with_max_output_bytes(mut self, b: u64) -> Self {
        self.max_output_bytes = b;
        self
    }
    pub fn with_runner(mut self, r: RunnerChoice) -> Self {
        self.runner = r;
        self
    }

    pub fn grace(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.grace_secs)
    }
}
