//! A job's seat in its session's pod (`pod/mod.rs`): given up when the job
//! ends, or when its launch fails ([`LeaveOnDrop`]); the last member of an
//! ended session's pod takes the pod along.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{Pod, Pods};
use crate::model::JobId;

/// What joining a pod came to.
pub enum Joined {
    In(Member),
    /// No pod for this job after all: why (the job's `not_enforced`).
    Outside(String),
}

/// A job's seat in a pod, left when the job ends ([`Member::leave`]).
pub struct Member {
    pub pod: Arc<Pod>,
    /// The members' names (labels, ids) when the job joined, its own
    /// included: never proxied (its `NO_PROXY`), they are on loopback.
    pub names: Vec<String>,
    pub(super) pods: Arc<Pods>,
    pub(super) id: JobId,
    pub(super) left: AtomicBool,
}

/// A seat given up when dropped unless kept ([`LeaveOnDrop::keep`]): a
/// launch that fails leaves its pod again.
pub struct LeaveOnDrop(Option<Member>);

impl LeaveOnDrop {
    pub fn new(m: Member) -> Self {
        LeaveOnDrop(Some(m))
    }

    pub fn member(&self) -> Option<&Member> {
        self.0.as_ref()
    }

    /// The seat, now the job's control's to give up.
    pub fn keep(mut self) -> Option<Arc<Member>> {
        self.0.take().map(Arc::new)
    }
}

impl Drop for LeaveOnDrop {
    fn drop(&mut self) {
        if let Some(m) = &self.0 {
            m.leave();
        }
    }
}

impl Member {
    /// The job ended: its seat is given up (its names leave the hosts
    /// file); the last member of an ended session's pod takes the pod along.
    /// Leaving twice is harmless.
    pub fn leave(&self) {
        if self.left.swap(true, Ordering::SeqCst) {
            return;
        }
        if self.pod.unseat(&self.id) {
            let (pods, pod) = (self.pods.clone(), self.pod.clone());
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(async move { pods.retire(&pod).await });
                }
                // Outside a runtime (a `Drop` path): the labelled sweep at
                // teardown removes the pause.
                Err(_) => pods.forget(&pod),
            }
        }
    }

    /// The pod's pause was found gone: the pod is forgotten.
    pub fn broken(&self) {
        self.left.store(true, Ordering::SeqCst);
        self.pods.forget(&self.pod);
    }
}
