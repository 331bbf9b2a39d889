//! The Swarm half of [`DockerClient`]: services, their tasks and logs, the
//! nodes they run on, and the configs that carry a job's workspace
//! (`runner/swarm/`). Each call fails as [`Error::Engine`] with its own
//! [`EngineOp`], as the container calls do.

use std::collections::HashMap;

use bollard::models::{ConfigSpec, Node, Service, ServiceSpec, Task};
use bollard::query_parameters::{
    InspectServiceOptions, ListConfigsOptions, ListServicesOptions, ListTasksOptions, LogsOptions,
    UpdateServiceOptions,
};
use futures_util::StreamExt;

use super::{DockerClient, OutputStream, fail};
use crate::error::{EngineOp, Result};

/// Filters that pick the objects carrying every `label=value` pair.
fn by_labels(labels: &[String]) -> HashMap<String, Vec<String>> {
    HashMap::from([("label".to_string(), labels.to_vec())])
}

impl DockerClient {
    /// Create a service; its id.
    pub async fn create_service(&self, spec: ServiceSpec) -> Result<String> {
        let name = spec.name.clone().unwrap_or_default();
        let made = self
            .docker
            .create_service(spec, None)
            .await
            .map_err(fail(EngineOp::CreateService, &name))?;
        Ok(made.id.unwrap_or(name))
    }

    pub async fn inspect_service(&self, id: &str) -> Result<Service> {
        self.docker
            .inspect_service(id, None::<InspectServiceOptions>)
            .await
            .map_err(fail(EngineOp::InspectService, id))
    }

    /// Replace a service's spec (`version`: the one inspect gave).
    pub async fn update_service(&self, id: &str, spec: ServiceSpec, version: u64) -> Result<()> {
        let opts = UpdateServiceOptions {
            version: version as i32,
            ..Default::default()
        };
        self.docker
            .update_service(id, spec, opts, None)
            .await
            .map(|_| ())
            .map_err(fail(EngineOp::UpdateService, id))
    }

    pub async fn remove_service(&self, id: &str) -> Result<()> {
        self.docker
            .delete_service(id)
            .await
            .map_err(fail(EngineOp::RemoveService, id))
    }

    /// The services carrying every one of `labels`.
    pub async fn list_services(&self, labels: &[String]) -> Result<Vec<Service>> {
        let opts = ListServicesOptions {
            filters: Some(by_labels(labels)),
            ..Default::default()
        };
        self.docker
            .list_services(Some(opts))
            .await
            .map_err(fail(EngineOp::ListServices, "services"))
    }

    /// The tasks of service `id` (one for a berth job, until it is rescheduled).
    pub async fn service_tasks(&self, id: &str) -> Result<Vec<Task>> {
        self.tasks_of(vec![id.to_string()]).await
    }

    /// The tasks of every service in `ids`, in one call.
    pub async fn tasks_of(&self, ids: Vec<String>) -> Result<Vec<Task>> {
        let target = ids.join(", ");
        let opts = ListTasksOptions {
            filters: Some(HashMap::from([("service".to_string(), ids)])),
        };
        self.docker
            .list_tasks(Some(opts))
            .await
            .map_err(fail(EngineOp::ListTasks, &target))
    }

    /// Every node of the swarm.
    pub async fn list_nodes(&self) -> Result<Vec<Node>> {
        self.docker
            .list_nodes(None::<bollard::query_parameters::ListNodesOptions>)
            .await
            .map_err(fail(EngineOp::ListNodes, "the swarm's nodes"))
    }

    /// Task `id`; `None` once the swarm forgot it.
    pub async fn inspect_task(&self, id: &str) -> Result<Option<Task>> {
        match self.docker.inspect_task(id).await {
            Ok(t) => Ok(Some(t)),
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(None),
            Err(e) => Err(fail(EngineOp::ListTasks, id)(e)),
        }
    }

    pub async fn inspect_node(&self, id: &str) -> Result<Node> {
        self.docker
            .inspect_node(id)
            .await
            .map_err(fail(EngineOp::InspectNode, id))
    }

    /// A service's output, stdout and stderr apart; `follow` keeps it open
    /// (it never ends on its own: the caller ends it).
    pub fn service_logs(&self, id: &str, follow: bool) -> OutputStream {
        let opts = LogsOptions {
            follow,
            stdout: true,
            stderr: true,
            ..Default::default()
        };
        let target = id.to_string();
        Box::pin(
            self.docker
                .service_logs(id, Some(opts))
                .map(move |item| item.map_err(|e| fail(EngineOp::ServiceLogs, &target)(e))),
        )
    }

    /// Create a config holding `data`; its id.
    pub async fn create_config(
        &self,
        name: &str,
        labels: HashMap<String, String>,
        data: &[u8],
    ) -> Result<String> {
        use base64::Engine as _;
        let spec = ConfigSpec {
            name: Some(name.to_string()),
            labels: Some(labels),
            data: Some(base64::engine::general_purpose::STANDARD.encode(data)),
            ..Default::default()
        };
        let made = self
            .docker
            .create_config(spec)
            .await
            .map_err(fail(EngineOp::CreateConfig, name))?;
        Ok(made.id)
    }

    pub async fn remove_config(&self, id: &str) -> Result<()> {
        self.docker
            .delete_config(id)
            .await
            .map_err(fail(EngineOp::RemoveConfig, id))
    }

    /// The configs carrying every one of `labels`: id and labels.
    pub async fn list_configs(&self, labels: &[String]) -> Result<Vec<(String, HashMap<String, String>)>> {
        let opts = ListConfigsOptions {
            filters: Some(by_labels(labels)),
        };
        let configs = self
            .docker
            .list_configs(Some(opts))
            .await
            .map_err(fail(EngineOp::ListConfigs, "configs"))?;
        Ok(configs
            .into_iter()
            .filter_map(|c| Some((c.id?, c.spec.and_then(|s| s.labels).unwrap_or_default())))
            .collect())
    }
}
