//! The MCP protocol side of [`BerthMcp`] (built in `service.rs`): a `call_tool` that turns every failure of a job operation
//! into an `isError` answer the model can read, answers calls that do not fit
//! a tool (unknown tool, arguments of the wrong shape) with JSON-RPC invalid
//! params (-32602), and appends the client's unseen events to every answer.
//!
//! rmcp runs each request in its own task, so a long call (a 60 s
//! foreground run, a wait) does not hold up the others.

use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, ListToolsResult, NumberOrString, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::backlog;
use super::core::off_worker;
use super::format::Dialect;
use super::service::BerthMcp;

const INSTRUCTIONS: &str = "berth runs commands as jobs you can leave running: dev servers, databases, \
watchers, long builds and test runs. Start servers with background: true and a `ready` condition, then use the \
URLs the answer gives. Short commands can run in the foreground: a command still running after its budget \
(60 s) moves to the background instead of being killed. Every answer ends with the job events you have not seen \
yet (watch hits, exits, kills by the user, moves to background): react to them. The jobs you start belong to this \
session: they are stopped when it ends. The cap on running jobs is shared with every other client of this berth \
instance (other sessions, the CLI); `list` shows all their jobs.";

/// How rmcp's message for arguments that do not deserialize begins.
const RMCP_ARGS_ERROR: &str = "failed to deserialize parameters:";

fn first_text(r: &CallToolResult) -> Option<&str> {
    r.content.first()?.as_text().map(|t| t.text.as_str())
}

/// Invalid params (-32602) for arguments that do not fit `tool`'s schema, in one line.
fn invalid_args(tool: &str, why: &str) -> ErrorData {
    let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
    ErrorData::invalid_params(
        format!("invalid arguments for `{tool}`: {why}; see its input schema in tools/list"),
        None,
    )
}

impl ServerHandler for BerthMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("berth", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let call_id = match &context.id {
            NumberOrString::Number(n) => n.to_string(),
            NumberOrString::String(s) => s.to_string(),
        };
        let tcc = ToolCallContext::new(self, request, context);
        let (result, covered) = backlog::scope(Some(call_id), self.router.call(tcc)).await;
        let mut result = match result {
            Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => {
                // rmcp turns arguments that do not deserialize into an `isError`
                // answer; JSON-RPC (and our clients) expect invalid params.
                match first_text(&r).and_then(|t| t.strip_prefix(RMCP_ARGS_ERROR)) {
                    Some(why) => return Err(invalid_args(&name, why)),
                    None => r,
                }
            }
            Ok(CallToolResponse::Complete(r)) => r,
            Ok(other) => return Ok(other),
            // Protocol errors per JSON-RPC / MCP: an unknown tool and arguments
            // that do not fit the tool's schema are invalid params (-32602).
            Err(_) if !self.router.has_route(&name) => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool `{name}`; this server offers: {}",
                        self.tool_names().join(", ")
                    ),
                    None,
                ));
            }
            Err(e) if e.code == ErrorCode::INVALID_PARAMS => {
                let why = e.message.strip_prefix(RMCP_ARGS_ERROR).unwrap_or(&e.message);
                return Err(invalid_args(&name, why));
            }
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!("error: {}", e.message))]),
        };
        // Each set's event fields: the shell seed's metadata; the exec seed's
        // watcher notifications carry a snippet of the output. Off the async
        // workers: older events, finished jobs' records and snippets may be
        // read from the store.
        let (core, dialect) = (self.core.clone(), self.dialect);
        let lines = off_worker(move || {
            let meta = |e: &crate::events::Event| match dialect {
                Dialect::Shell => super::compat_shell::shell_event_meta(&core, e),
                Dialect::Exec => super::compat_exec::exec_event_meta(&core, e),
                _ => None,
            };
            core.backlog
                .take(&core.manager, &covered, &meta, &core.event_reader())
        })
        .await;
        if !lines.is_empty() {
            // A client that joins text blocks must not run the answer's
            // last line into the events header.
            if let Some(ContentBlock::Text(t)) = result.content.last_mut()
                && !t.text.ends_with('\n')
            {
                t.text.push('\n');
            }
            result.content.push(ContentBlock::text(format!(
                "Events since your last call:\n{}\n",
                lines.join("\n")
            )));
        }
        // Job output, labels and reasons quoted in any answer reach the
        // model (and whoever reads the transcript) inert: `\x1b`, `\u202e`.
        for block in &mut result.content {
            if let ContentBlock::Text(t) = block
                && let std::borrow::Cow::Owned(inert) = crate::inert::visible_lines(&t.text)
            {
                t.text = inert;
            }
        }
        Ok(result.into())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut result = ListToolsResult::with_all_items(self.router.list_all());
        if context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
        {
            result = result.with_ttl_ms(0).with_cache_scope(CacheScope::Public);
        }
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.router.get(name).cloned()
    }
}
