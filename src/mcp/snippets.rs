//! The exec set's output snippets, each sent once. A watch hit of the exec
//! set carries a snippet of the run's output (the seed's watcher
//! notification); several hits on the same output, and a `poll` right
//! after, would repeat the same ~1.5 KB. So the session remembers, per run,
//! which event last carried a snippet and how far the output went then: a
//! later hit (or `poll`) on no new output names that event by its seq
//! instead of repeating it.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::manager::Manager;
use crate::model::JobId;

/// The last snippet sent for a run: in event `event`, with output up to line `upto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub event: u64,
    pub upto: u64,
}

/// Per session: the snippets sent so far.
#[derive(Default)]
pub struct Snippets {
    sent: Mutex<HashMap<JobId, Sent>>,
}

impl Snippets {
    /// The event that carries the run's output as it is now, if one was sent.
    pub fn current(&self, manager: &Manager, job: &JobId) -> Option<u64> {
        let last = manager.info(job).ok()?.last_seq;
        let sent = self.sent.lock().unwrap().get(job).copied()?;
        (sent.upto >= last).then_some(sent.event)
    }

    /// What the watch hit `event` of `job` carries: the snippet (recorded as
    /// sent), or a reference to the event that carried the same output.
    pub fn for_event(&self, manager: &Manager, job: &JobId, event: u64) -> Option<String> {
        if let Some(earlier) = self.current(manager, job) {
            return Some(format!("(snippet: see event #{earlier})"));
        }
        // Read the line count first: output that comes in meanwhile is in
        // the snippet, and only makes the next hit carry one again.
        let upto = manager.info(job).ok()?.last_seq;
        let snippet = manager.snippet(job).ok()?;
        self.sent
            .lock()
            .unwrap()
            .insert(job.clone(), Sent { event, upto });
        let indented: Vec<String> = snippet.lines().map(|l| format!("    {l}")).collect();
        Some(format!("\n  snippet:\n{}", indented.join("\n")))
    }
}
