//! The safety layer: placeholder until the safety issue lands. `check` is
//! called by the manager for every job before any runner sees it.

use std::path::Path;

use crate::config::Config;
use crate::error::Result;
use crate::job::JobSpec;

/// The command filter, workspace guard and security log of one manager.
#[derive(Debug, Clone, Default)]
pub struct Safety {}

impl Safety {
    pub fn from_config(_config: &Config) -> Result<Self> {
        Ok(Safety {})
    }

    /// Refuse `spec` (run in `cwd`, started by `client`) if it is blocked or
    /// escapes the workspace; log blocked commands.
    pub fn check(&self, _spec: &JobSpec, _cwd: &Path, _client: &str) -> Result<()> {
        Ok(())
    }
}
