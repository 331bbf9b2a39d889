//! How jobs write their workspace (`write` for the CLI, `agent_write` for
//! agents' MCP sessions) and how long and how big their layers may grow
//! (`layer_days`, `layer_size`); what an agent's apply may do to the
//! checkout (`apply_max_deletes`, `apply_protect`). See `crate::layers`.

use crate::model::WriteMode;

/// The CLI's default: the person typing sees the result at once.
pub const DEFAULT_WRITE: WriteMode = WriteMode::Direct;
/// An agent's default: its writes wait in a layer until someone applies them.
pub const DEFAULT_AGENT_WRITE: WriteMode = WriteMode::Layer;
/// Days an idle layer is kept before it is pruned (its files gone).
pub const DEFAULT_LAYER_DAYS: f64 = 7.0;
/// Most bytes one layer may hold; a job writing more is stopped.
pub const DEFAULT_LAYER_BYTES: u64 = 10 << 30;
/// Most checkout files an agent's apply may delete or truncate.
pub const DEFAULT_APPLY_MAX_DELETES: usize = 20;
