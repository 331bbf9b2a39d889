//! MCP sessions: who a session is, serving one over any byte stream, and the
//! sessions attached to a serving manager.
//!
//! Every MCP session has an owner id, `mcp:<pid>-<n>`, and the context of its
//! client: its working directory and `BERTH_*` variables. Each job the
//! session starts carries them (`spec.owner`, `spec.caller_cwd`,
//! `spec.caller_env`), so that it runs under the client's project and the session's end stops exactly
//! its own jobs: when its input ends (the client's stdin closed, or the
//! client went away and its connection dropped), [`serve`] stops them with
//! `ended_by: system`, reason `session ended`, through
//! [`Manager::end_owner`], and jobs of other sessions and of the CLI keep
//! running. When the host itself tears down ([`Sessions::close`], after
//! `Manager::shutdown` stopped every job), sessions only let their last
//! answers out and end.
//!
//! The same [`serve`] runs the session of an in-process `berth mcp` (on its
//! stdin/stdout) and every session attached over the instance socket (on the
//! upgraded connection), with the line framing of `stdio.rs` in front.
//!
//! Attached sessions are bounded: at most [`MAX_SESSIONS`] at once
//! ([`Sessions::enter`] refuses the next), and one whose client sent
//! nothing for the manager's `mcp_idle` while none of its jobs is active
//! gets a notice line and ends (a session of the process's own stdio lasts
//! as long as its client).

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::{BerthMcp, ToolSet, stdio};
use crate::manager::Manager;

/// How long in-flight MCP answers get to go out after a session ends.
pub const DRAIN_ANSWERS: Duration = Duration::from_millis(1500);
/// Most MCP sessions attached to one manager at once (each holds a
/// connection and a server task); more are refused with one clear answer.
pub const MAX_SESSIONS: usize = 64;

pub use super::core::Session;

/// The sessions attached to a serving manager over its socket: how many,
/// and the signal that the host is tearing down.
#[derive(Clone)]
pub struct Sessions {
    attached: Arc<watch::Sender<usize>>,
    /// Cancelled when the host tears down; each session holds a child.
    closing: CancellationToken,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            attached: Arc::new(watch::Sender::new(0)),
            closing: CancellationToken::new(),
        }
    }
}

/// Counts one attached session while it lives.
pub struct Attached(Sessions);

/// Why a session could not attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The host is tearing down.
    Closing,
    /// [`MAX_SESSIONS`] are attached already.
    Full,
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.0.attached.send_modify(|n| *n -= 1);
    }
}

impl Sessions {
    /// Sessions attached right now.
    pub fn attached(&self) -> usize {
        *self.attached.borrow()
    }

    /// Count a new attached session: refused once the host is tearing
    /// down, or when [`MAX_SESSIONS`] are attached.
    pub fn enter(&self) -> Result<Attached, Refused> {
        if self.closing.is_cancelled() {
            return Err(Refused::Closing);
        }
        let entered = self.attached.send_if_modified(|n| {
            let room = *n < MAX_SESSIONS;
            if room {
                *n += 1;
            }
            room
        });
        if !entered {
            return Err(Refused::Full);
        }
        Ok(Attached(self.clone()))
    }

    /// How many sessions are attached now.
    pub fn count(&self) -> usize {
        *self.attached.borrow()
    }

    /// Wait until no session is attached.
    pub async fn none_attached(&self) {
        let mut rx = self.attached.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// Tell every session that the host tears down (its jobs are stopped already).
    pub fn close(&self) {
        self.closing.cancel();
    }

    /// A session's token: cancelled when the host tears down.
    pub fn closing(&self) -> CancellationToken {
        self.closing.child_token()
    }
}

/// Serve one MCP session on `input`/`output` until the input ends, the
/// host tears down (`closing`), or (with `idle`) the client sent nothing
/// for that long while none of the session's jobs runs: then it gets one
/// notice line saying so and the session ends. At the input's end the
/// session's jobs are stopped (`session ended`) before its last answers go out.
pub async fn serve<R, W>(
    manager: Manager,
    tools: ToolSet,
    session: Session,
    input: R,
    output: W,
    closing: CancellationToken,
    idle: Option<Duration>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let stdio::Framed {
        to_rmcp,
        from_rmcp,
        mut eof,
        input_at,
        notices,
    } = stdio::spawn(input, output, stdio::MAX_LINE);
    let owner = session.owner.clone();
    let server = BerthMcp::for_session(manager.clone(), tools, session);
    let (ct_tx, mut ct_rx) = oneshot::channel();
    let mut mcp = tokio::spawn(async move {
        match server.serve((to_rmcp, from_rmcp)).await {
            Ok(running) => {
                let _ = ct_tx.send(running.cancellation_token());
                let _ = running.waiting().await;
            }
            Err(e) => tracing::info!(error = %e, "MCP session ended before it began"),
        }
    });
    tracing::info!(%owner, "MCP session open");
    let mut mcp_done = false;
    let ended = tokio::select! {
        _ = eof.wait_for(|e| *e) => true,
        _ = &mut mcp => {
            mcp_done = true;
            true
        }
        _ = closing.cancelled() => false,
        secs = idle_out(&manager, &owner, idle, input_at) => {
            tracing::info!(%owner, secs, "MCP session idle: closing it");
            let _ = notices.send(idle_notice(secs));
            true
        }
    };
    drop(notices);
    if ended {
        let stopped = manager
            .end_owner(&owner, crate::model::StopCause::SessionEnded)
            .await;
        tracing::info!(%owner, ?stopped, "MCP session ended; its jobs are stopped");
    }
    // Answers of calls that were waiting on those jobs go out, then MCP stops.
    if let Ok(ct) = ct_rx.try_recv() {
        ct.cancel();
    }
    if !mcp_done && tokio::time::timeout(DRAIN_ANSWERS, &mut mcp).await.is_err() {
        mcp.abort();
    }
}

/// Resolves (with the idle seconds) once the client has sent nothing for
/// `idle` and none of `owner`'s jobs is queued or running; never without
/// `idle`. A session whose jobs run is looked at again every `idle`.
async fn idle_out(
    manager: &Manager,
    owner: &str,
    idle: Option<Duration>,
    input_at: watch::Receiver<tokio::time::Instant>,
) -> u64 {
    let Some(idle) = idle.filter(|d| !d.is_zero()) else {
        return std::future::pending().await;
    };
    loop {
        let last = *input_at.borrow();
        tokio::time::sleep_until(last + idle).await;
        if *input_at.borrow() != last {
            continue;
        }
        if !manager.owns_active(owner) {
            return idle.as_secs();
        }
        tokio::time::sleep(idle).await;
    }
}

/// The one line an idle session gets before it is closed: an MCP log
/// notification saying why and what to do.
fn idle_notice(secs: u64) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {
            "level": "warning",
            "logger": "berth",
            "data": format!("berth: this MCP session sent nothing for {secs} s and runs no job: it is closed (mcp_idle); start a new session to go on"),
        },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JobSpec;
    use std::collections::BTreeMap;

    /// Past MAX_SESSIONS attached, the next is refused; one leaving makes room.
    #[test]
    fn sessions_are_bounded() {
        let s = Sessions::default();
        let mut held: Vec<Attached> = (0..MAX_SESSIONS).map(|_| s.enter().expect("room")).collect();
        assert_eq!(s.enter().err(), Some(Refused::Full));
        assert_eq!(s.attached(), MAX_SESSIONS);
        held.pop();
        assert!(s.enter().is_ok());
    }

    #[test]
    fn sessions_have_distinct_owners_and_claim_their_jobs() {
        let env = BTreeMap::from([("BERTH_IMAGE".to_string(), "x".to_string())]);
        let a = Session::new(Some("/tmp/a".into()), env.clone());
        let b = Session::new(None, BTreeMap::new());
        assert_ne!(a.owner, b.owner);
        assert!(a.owner.starts_with("mcp:"), "{}", a.owner);
        let mut spec = JobSpec::shell("true");
        spec.owner = Some("mcp:someone-else".into());
        a.claim(&mut spec);
        assert_eq!(spec.owner.as_deref(), Some(a.owner.as_str()));
        assert_eq!(spec.caller_cwd.as_deref(), Some(std::path::Path::new("/tmp/a")));
        assert_eq!(spec.caller_env, env);
    }

    #[tokio::test]
    async fn attached_sessions_are_counted_and_refused_once_closing() {
        let s = Sessions::default();
        let one = s.enter().expect("open");
        let two = s.enter().expect("open");
        assert_eq!(s.attached(), 2);
        drop(one);
        drop(two);
        s.none_attached().await;
        s.close();
        assert!(s.closing().is_cancelled());
        assert_eq!(s.enter().err(), Some(Refused::Closing));
    }
}
