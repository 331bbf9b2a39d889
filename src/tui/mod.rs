//! The TUI panel (`berth tui`): placeholder until the TUI issue lands.

use crate::config::Config;
use crate::error::{Error, Result};

/// Attach to the instance's manager and run the panel until the user leaves.
pub async fn run(_config: Config) -> Result<()> {
    Err(Error::InvalidSpec("berth tui is not implemented yet".into()))
}
