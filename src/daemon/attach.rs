//! `POST /v1/mcp`: an MCP session hosted by the serving manager.
//!
//! The client (`berth mcp` finding a manager on the instance socket) asks
//! for an HTTP/1.1 upgrade to `berth-mcp`; the answer is `101 Switching
//! Protocols`, after which the connection carries MCP messages, one JSON
//! line each way, served by the same rmcp server as an in-process `berth
//! mcp`, on the shared manager: one cap, one event log, one job list. The
//! session lives as long as the connection: when the client's input ends
//! (or the client dies and the connection drops), the session's jobs are
//! stopped (`session ended`); see `mcp/session.rs`. Past `MAX_SESSIONS`
//! attached sessions the answer is `503 too_many_sessions`, and the
//! session is given the manager's `mcp_idle`.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use hyper_util::rt::TokioIo;

use super::state::{ApiError, AppState};
use crate::api::{MCP_UPGRADE, McpAttachQuery};
use crate::error::Error;
use crate::mcp::ToolSet;
use crate::mcp::session::{self, MAX_SESSIONS, Refused, Session};

/// The header of the 101 answer naming the session's owner id (`mcp:…`).
pub const SESSION_HEADER: &str = "berth-session";

pub(super) async fn attach(
    State(s): State<AppState>,
    q: Result<Query<McpAttachQuery>, QueryRejection>,
    mut req: Request,
) -> Result<Response, ApiError> {
    let Query(q) = q?;
    let upgrade = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case(MCP_UPGRADE));
    if !upgrade {
        return Err(ApiError::bad_request(format!(
            "POST /v1/mcp opens an MCP session: send `Connection: Upgrade` and `Upgrade: {MCP_UPGRADE}` (or run `berth mcp`)"
        )));
    }
    let tools: ToolSet = q.tools.as_deref().unwrap_or("canonical").parse()?;
    let cwd = match q.cwd {
        Some(p) if !p.is_absolute() => {
            return Err(Error::InvalidValue {
                what: "cwd",
                input: p.display().to_string(),
                message: "must be an absolute path (the client's working directory)".into(),
            }
            .into());
        }
        p => p,
    };
    let env: BTreeMap<String, String> = match q.env.as_deref() {
        None => BTreeMap::new(),
        Some(json) => serde_json::from_str(json).map_err(|e| Error::InvalidValue {
            what: "env",
            input: json.chars().take(64).collect(),
            message: format!("expected a JSON object of BERTH_* variables ({e})"),
        })?,
    };
    crate::manager::project::check_vars(&env)?;
    let attached = match s.sessions.enter() {
        Ok(a) => a,
        Err(Refused::Closing) => return Err(Error::ShuttingDown.into()),
        Err(Refused::Full) => {
            return Err(ApiError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                code: "too_many_sessions".into(),
                message: format!(
                    "{MAX_SESSIONS} MCP sessions are attached to this manager, the most it serves; end one (close its client) or try again later"
                ),
            });
        }
    };
    let config = s.manager.config();
    let idle = (config.mcp_idle_secs > 0.0).then(|| std::time::Duration::from_secs_f64(config.mcp_idle_secs));
    let on_upgrade = hyper::upgrade::on(&mut req);
    let session = Session::new(cwd, env);
    let owner = session.owner.clone();
    let manager = s.manager.clone();
    let closing = s.sessions.closing();
    tokio::spawn(async move {
        let _attached = attached;
        match on_upgrade.await {
            Ok(upgraded) => {
                let (input, output) = tokio::io::split(TokioIo::new(upgraded));
                session::serve(manager, tools, session, input, output, closing, idle).await;
            }
            Err(e) => tracing::info!(error = %e, "an MCP client left before its session began"),
        }
    });
    Ok(Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, MCP_UPGRADE)
        .header(SESSION_HEADER, owner)
        .body(Body::empty())
        .expect("response parts are valid"))
}
