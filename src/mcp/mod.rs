//! The MCP server (`berth mcp`): placeholder until the MCP issue lands.

use std::str::FromStr;

use crate::config::Config;
use crate::error::{Error, Result};

/// Which tools `berth mcp` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolSet {
    #[default]
    Canonical,
    All,
}

impl FromStr for ToolSet {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "canonical" => Ok(ToolSet::Canonical),
            "all" => Ok(ToolSet::All),
            _ => Err(Error::InvalidValue {
                what: "tool set",
                input: s.into(),
                message: "expected canonical or all".into(),
            }),
        }
    }
}

/// Serve MCP on stdio with an in-process manager that also serves the
/// instance socket, until stdin ends or a signal arrives.
pub async fn run(_config: Config, _tools: ToolSet) -> Result<()> {
    Err(Error::InvalidSpec("berth mcp is not implemented yet".into()))
}
