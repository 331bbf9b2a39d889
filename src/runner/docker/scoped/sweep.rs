//! A dead manager's scoped-engine children, removed from synchronous code:
//! recovery reaps a job that had a scoped engine (its socket died with the
//! manager that served it) together with its children, found by the
//! `berth.parent` label its job's container name gives them.

use super::super::cleanup::{list_labelled, remove_container, remove_volumes};
use super::super::{BLOCKING_REMOVE_LIMIT, Engine, connect};

/// Longest recovery waits for one job's children to go.
const CHILDREN_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

impl Engine {
    /// From synchronous code (recovery's reaping of a run): remove the
    /// children job `id` started through its scoped engine.
    pub fn remove_children_blocking(&self, id: &crate::model::JobId) -> usize {
        let parent = super::super::ownership::container_name(&self.instance, self.state(), id);
        let mut labels = self.ownership.filters();
        labels.push(format!("{}={parent}", super::LABEL_PARENT));
        let (endpoint, this) = (self.endpoint.clone(), labels);
        let work = async move {
            let Ok(docker) = connect(&endpoint, BLOCKING_REMOVE_LIMIT).await else {
                return 0;
            };
            let Some(listed) = list_labelled(&docker, this.clone()).await else {
                return 0;
            };
            let ids: Vec<String> = listed.into_iter().filter_map(|c| c.id).collect();
            let mut n = 0;
            for id in &ids {
                n += usize::from(remove_container(&docker, id).await);
            }
            remove_volumes(&docker, &this).await;
            n
        };
        // One by one, each bounded by the engine client's own limit.
        crate::runner::drop_worker::run(CHILDREN_LIMIT, work).unwrap_or(0)
    }
}
