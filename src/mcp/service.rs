//! The `berth mcp` server object: one per session, holding the session's
//! [`Core`] (manager + owner), the answer dialect of its tool set, and one
//! rmcp router with the tools of the chosen [`ToolSet`]. The tools are
//! defined by tool set in `tools.rs` and `compat_*.rs`; the protocol
//! handling (errors, backlog) is `server.rs`.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;

use super::ToolSet;
use super::core::Core;
use super::format::Dialect;
use super::session::Session;
use crate::manager::Manager;

/// The `berth mcp` server.
#[derive(Clone)]
pub struct BerthMcp {
    pub(super) core: Arc<Core>,
    /// Hints for tools shared between sets (`run_test`, `run_build`, `status`…).
    pub(super) dialect: Dialect,
    pub(super) router: Arc<ToolRouter<BerthMcp>>,
}

impl BerthMcp {
    /// A server for a new session with no known working directory.
    pub fn new(manager: Manager, tools: ToolSet) -> Self {
        Self::for_session(manager, tools, Session::new(None, Default::default()))
    }

    /// A server for `session`: the jobs it starts are the session's.
    pub fn for_session(manager: Manager, tools: ToolSet, session: Session) -> Self {
        let mut router = Self::canonical_router()
            + Self::safe_shell_router()
            + Self::shell_router()
            + Self::process_router()
            + Self::exec_router()
            + Self::layers_router();
        let names = tools.tool_names();
        router.map.retain(|name, _| names.contains(&name.as_ref()));
        BerthMcp {
            core: Arc::new(Core::new(manager, session)),
            dialect: match tools {
                ToolSet::Process => Dialect::Process,
                ToolSet::Shell => Dialect::Shell,
                ToolSet::Exec => Dialect::Exec,
                _ => Dialect::Canonical,
            },
            router: Arc::new(router),
        }
    }

    /// Names of the tools this server offers, sorted.
    pub fn tool_names(&self) -> Vec<String> {
        self.router
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }
}
