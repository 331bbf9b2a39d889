//! Each node of the swarm with what this instance's running jobs reserve
//! on it (`berth ps --usage`). Why reservations and not a sample: the
//! manager's API reads a container's stats only on the node it runs on,
//! and a swarm's other engines are usually not reachable; the limits
//! berth sets are reservations too (`spec.rs`), so what a node holds for
//! berth is exactly what the scheduler counts when it places the next job.

use std::collections::HashMap;

use bollard::models::{Node, Task, TaskState};

use super::Swarm;
use crate::error::Result;
use crate::model::NodeLoad;

impl Swarm {
    /// Every node, with the count and reservations of this instance's
    /// tasks that are placed or running there.
    pub async fn node_loads(&self) -> Result<Vec<NodeLoad>> {
        let docker = self.client().await?;
        let services: Vec<String> = docker
            .list_services(&self.ownership.filters())
            .await?
            .into_iter()
            .filter_map(|s| s.id)
            .collect();
        let tasks = match services.is_empty() {
            true => Vec::new(),
            false => docker.tasks_of(services).await?,
        };
        Ok(loads(docker.list_nodes().await?, &tasks))
    }
}

/// A task that holds its reservation: asked to run and not ended yet.
fn holds(task: &Task) -> bool {
    let ended = task.status.as_ref().and_then(|s| s.state).is_none_or(|s| {
        matches!(
            s,
            TaskState::COMPLETE
                | TaskState::FAILED
                | TaskState::REJECTED
                | TaskState::SHUTDOWN
                | TaskState::ORPHANED
                | TaskState::REMOVE
        )
    });
    task.desired_state == Some(TaskState::RUNNING) && !ended
}

/// Nodes by name, each with what `tasks` hold on it.
fn loads(nodes: Vec<Node>, tasks: &[Task]) -> Vec<NodeLoad> {
    let mut held: HashMap<&str, (usize, i64, i64)> = HashMap::new();
    for t in tasks.iter().filter(|t| holds(t)) {
        let Some(node) = t.node_id.as_deref() else {
            continue;
        };
        let r = t
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.reservations.as_ref());
        let e = held.entry(node).or_default();
        e.0 += 1;
        e.1 += r.and_then(|r| r.nano_cpus).unwrap_or(0);
        e.2 += r.and_then(|r| r.memory_bytes).unwrap_or(0);
    }
    let mut out: Vec<NodeLoad> = nodes
        .into_iter()
        .map(|n| {
            let (jobs, cpus, memory) =
                n.id.as_deref()
                    .and_then(|id| held.get(id))
                    .copied()
                    .unwrap_or_default();
            let has = n.description.as_ref().and_then(|d| d.resources.as_ref());
            NodeLoad {
                node: n
                    .description
                    .as_ref()
                    .and_then(|d| d.hostname.clone())
                    .or(n.id)
                    .unwrap_or_default(),
                state: n
                    .status
                    .and_then(|s| s.state)
                    .map_or("unknown".into(), |s| s.to_string()),
                jobs,
                cpus_reserved: cpus as f64 / 1e9,
                cpus: has.and_then(|r| r.nano_cpus).unwrap_or(0) as f64 / 1e9,
                memory_reserved: memory.max(0) as u64,
                memory: has.and_then(|r| r.memory_bytes).unwrap_or(0).max(0) as u64,
            }
        })
        .collect();
    out.sort_by(|a, b| a.node.cmp(&b.node));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{
        NodeDescription, NodeState, NodeStatus, ResourceObject, TaskSpec, TaskSpecResources, TaskStatus,
    };

    fn node(id: &str, name: &str, state: NodeState) -> Node {
        Node {
            id: Some(id.into()),
            description: Some(NodeDescription {
                hostname: Some(name.into()),
                resources: Some(ResourceObject {
                    nano_cpus: Some(2_000_000_000),
                    memory_bytes: Some(8 << 30),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                state: Some(state),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn task(node: &str, state: TaskState, desired: TaskState) -> Task {
        Task {
            node_id: Some(node.into()),
            desired_state: Some(desired),
            status: Some(TaskStatus {
                state: Some(state),
                ..Default::default()
            }),
            spec: Some(TaskSpec {
                resources: Some(TaskSpecResources {
                    reservations: Some(ResourceObject {
                        nano_cpus: Some(500_000_000),
                        memory_bytes: Some(256 << 20),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn each_node_counts_only_the_tasks_that_still_hold_their_reservation() {
        let nodes = vec![
            node("b", "sw2", NodeState::DOWN),
            node("a", "sw1", NodeState::READY),
        ];
        let tasks = [
            task("a", TaskState::RUNNING, TaskState::RUNNING),
            task("a", TaskState::STARTING, TaskState::RUNNING),
            // Ended, or asked to stop: the scheduler gave their share back.
            task("a", TaskState::COMPLETE, TaskState::SHUTDOWN),
            task("a", TaskState::RUNNING, TaskState::SHUTDOWN),
            task("b", TaskState::RUNNING, TaskState::RUNNING),
        ];
        let got = loads(nodes, &tasks);
        let row = |n: &NodeLoad| {
            (
                n.node.clone(),
                n.state.clone(),
                n.jobs,
                n.cpus_reserved,
                n.memory_reserved,
            )
        };
        assert_eq!(
            got.iter().map(row).collect::<Vec<_>>(),
            vec![
                ("sw1".into(), "ready".into(), 2, 1.0, 512 << 20),
                ("sw2".into(), "down".into(), 1, 0.5, 256 << 20),
            ]
        );
        assert_eq!((got[0].cpus, got[0].memory), (2.0, 8 << 30));
    }
}
