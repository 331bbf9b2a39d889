//! What is kept of finished runs: how many (`keep_runs`), for how long
//! (`keep_days`); older ones are pruned. Whether `env` values are stored
//! (`store_env`) is a plain switch in the key table.

use crate::error::Result;

/// Finished runs kept in history (newest first); older ones are pruned.
pub const DEFAULT_KEEP_RUNS: usize = 500;
/// Finished runs older than this many days are pruned.
pub const DEFAULT_KEEP_DAYS: f64 = 7.0;

/// `keep_days`: zero prunes every finished run; a negative age means nothing.
pub(super) fn days(key: &'static str, v: f64) -> Result<f64> {
    super::table::zero_or_more(key, v, "zero or more days")
}
