//! A job's task on the swarm: where the scheduler put it, and how it ended.
//!
//! The swarm reports a task, not a process: berth polls its state (there
//! are no task events), reads its exit code only from a terminal state (a
//! task on a node that crashed stays `running` with exit code 0 forever),
//! and asks after the node too: once the manager marks it `down` (~12 s
//! after it stopped answering) the task is lost, named by its node.

use std::time::Duration;

use bollard::models::{NodeState, Task, TaskState};

use crate::error::{Error, Result};
use crate::runner::Exit;
use crate::runner::docker::DockerClient;

/// How often a task that is not yet running is asked after: the start's
/// latency is this at most beyond the swarm's own.
pub const START_POLL: Duration = Duration::from_millis(25);
/// How often a running task (and its node) is asked after.
pub const RUN_POLL: Duration = Duration::from_millis(250);

/// The node a task runs on, as the caller names it.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub hostname: String,
    /// The node's address, where its host-mode ports are published.
    pub addr: std::net::IpAddr,
}

impl std::fmt::Display for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.hostname, self.addr)
    }
}

/// A task the scheduler placed and its node started (or already ended).
pub struct Placed {
    pub task: String,
    pub node: Node,
    /// (job port, node port) of each published port.
    pub ports: Vec<(u16, u16)>,
}

fn state(t: &Task) -> Option<TaskState> {
    t.status.as_ref().and_then(|s| s.state)
}

fn is_terminal(s: TaskState) -> bool {
    matches!(
        s,
        TaskState::COMPLETE
            | TaskState::FAILED
            | TaskState::SHUTDOWN
            | TaskState::REJECTED
            | TaskState::ORPHANED
            | TaskState::REMOVE
    )
}

/// The swarm's words for why a task did not run.
fn why(t: &Task) -> String {
    let status = t.status.as_ref();
    let err = status.and_then(|s| s.err.clone()).unwrap_or_default();
    let msg = status.and_then(|s| s.message.clone()).unwrap_or_default();
    match (err.is_empty(), msg.is_empty()) {
        (false, _) => err,
        (true, false) => msg,
        (true, true) => "no reason given".into(),
    }
}

/// Wait until the service's task runs (or ended: a quick job), at most
/// `limit`; a task the swarm rejected, or one that failed before its
/// container existed, is the launch's error.
pub async fn placed(docker: &DockerClient, service: &str, limit: Duration) -> Result<Placed> {
    let fail = |message: String| Error::Docker {
        action: "start the job on the swarm",
        job: service.to_string(),
        message,
    };
    let deadline = tokio::time::Instant::now() + limit;
    let mut last = "no task yet".to_string();
    loop {
        let tasks = docker.service_tasks(service).await?;
        if let Some(t) = tasks.iter().max_by(|a, b| a.created_at.cmp(&b.created_at)) {
            let s = state(t);
            let ran = t
                .status
                .as_ref()
                .and_then(|s| s.container_status.as_ref())
                .and_then(|c| c.container_id.as_ref())
                .is_some();
            match s {
                Some(TaskState::REJECTED) => {
                    return Err(fail(format!("the swarm rejected its task: {}", why(t))));
                }
                Some(s) if is_terminal(s) && !ran => {
                    return Err(fail(format!("its task ended {s} before it ran: {}", why(t))));
                }
                Some(s) if s == TaskState::RUNNING || is_terminal(s) => {
                    if let (Some(task), Some(node)) = (&t.id, &t.node_id) {
                        let node = node_of(docker, node).await?;
                        return Ok(Placed {
                            task: task.clone(),
                            node,
                            ports: ports(t),
                        });
                    }
                }
                Some(s) => last = format!("its task is {s}: {}", why(t)),
                None => {}
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(fail(format!(
                "it did not run within {}s ({last}); the nodes may lack the image (load it on every node) or room for its reservations",
                limit.as_secs()
            )));
        }
        tokio::time::sleep(START_POLL).await;
    }
}

/// (target, published) of each port the task's node published.
fn ports(t: &Task) -> Vec<(u16, u16)> {
    let published = t
        .status
        .as_ref()
        .and_then(|s| s.port_status.as_ref())
        .and_then(|p| p.ports.as_ref());
    published
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let target = u16::try_from(p.target_port?).ok()?;
            let host = u16::try_from(p.published_port?).ok()?;
            Some((target, host))
        })
        .collect()
}

/// The node's name and address.
pub async fn node_of(docker: &DockerClient, id: &str) -> Result<Node> {
    let node = docker.inspect_node(id).await?;
    let hostname = node
        .description
        .as_ref()
        .and_then(|d| d.hostname.clone())
        .unwrap_or_else(|| id.to_string());
    let addr = node
        .status
        .as_ref()
        .and_then(|s| s.addr.as_deref())
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| Error::Docker {
            action: "find the job's node",
            job: id.to_string(),
            message: format!("node {hostname} reports no address"),
        })?;
    Ok(Node {
        id: id.to_string(),
        hostname,
        addr,
    })
}

/// How the task stands, asked once: `Some` once it ended (or its node is
/// down), `None` while it runs. Errors (the manager not answering) are the
/// caller's to retry.
pub async fn ended(docker: &DockerClient, placed: &Placed, stopped: bool) -> Result<Option<Exit>> {
    let Some(t) = docker.inspect_task(&placed.task).await? else {
        return Ok(Some(Exit::Lost(format!(
            "its task on {} is gone from the swarm",
            placed.node
        ))));
    };
    if let Some(s) = state(&t)
        && is_terminal(s)
    {
        return Ok(Some(exit_of(&t, s, stopped)));
    }
    let node = docker.inspect_node(&placed.node.id).await?;
    let node_state = node.status.as_ref().and_then(|s| s.state);
    if matches!(node_state, Some(NodeState::DOWN) | None) {
        return Ok(Some(Exit::Lost(format!(
            "its node {} went down (the swarm's manager lost it): its output there is gone with it",
            placed.node
        ))));
    }
    Ok(None)
}

/// The exit a terminal task reports: its container's code, a stop berth
/// asked for as the signal (128+N), a task the swarm gave up on as lost.
fn exit_of(t: &Task, s: TaskState, stopped: bool) -> Exit {
    let code = t
        .status
        .as_ref()
        .and_then(|s| s.container_status.as_ref())
        .and_then(|c| c.exit_code);
    match (s, code) {
        (TaskState::COMPLETE, _) => Exit::Code(0),
        (TaskState::FAILED | TaskState::SHUTDOWN, Some(c)) if stopped && c > 128 => {
            Exit::Signal((c - 128) as i32)
        }
        (TaskState::FAILED | TaskState::SHUTDOWN, Some(c)) => Exit::Code(c as i32),
        (TaskState::SHUTDOWN, None) if stopped => Exit::Signal(nix::sys::signal::Signal::SIGTERM as i32),
        _ => Exit::Lost(format!("the swarm ended its task {s}: {}", why(t))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{ContainerStatus, TaskStatus};

    fn task(s: TaskState, code: Option<i64>) -> Task {
        Task {
            status: Some(TaskStatus {
                state: Some(s),
                err: Some("task: non-zero exit".into()),
                container_status: Some(ContainerStatus {
                    exit_code: code,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn exit_codes_come_from_terminal_states_only_and_a_stop_reads_as_its_signal() {
        assert_eq!(
            exit_of(&task(TaskState::COMPLETE, Some(0)), TaskState::COMPLETE, false),
            Exit::Code(0)
        );
        assert_eq!(
            exit_of(&task(TaskState::FAILED, Some(3)), TaskState::FAILED, false),
            Exit::Code(3)
        );
        assert_eq!(
            exit_of(&task(TaskState::FAILED, Some(143)), TaskState::FAILED, false),
            Exit::Code(143)
        );
        assert_eq!(
            exit_of(&task(TaskState::SHUTDOWN, Some(143)), TaskState::SHUTDOWN, true),
            Exit::Signal(15)
        );
        assert!(matches!(
            exit_of(&task(TaskState::ORPHANED, None), TaskState::ORPHANED, false),
            Exit::Lost(_)
        ));
        assert!(!is_terminal(TaskState::RUNNING));
    }
}
