//! The store's health as jobs see it. When the store cannot be written
//! (`store::StoreHealth`: a full or failing disk), every job under way gets
//! a `store_degraded` event and a `Store:` line on its card saying since
//! when and why; when it can be written again, a `store_recovered` event,
//! and the line says for how long it could not. Meanwhile new jobs are
//! refused (`start.rs`) and `/v1/health` says `degraded`.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Inner;
use crate::events::EventKind;
use crate::model::JobId;
use crate::store::StoreHealth;

/// Follow the store's health for as long as the manager lives (nothing to
/// do without a runtime: a synchronous user has no events to follow).
pub(super) fn watch(inner: &Arc<Inner>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut rx = inner.store.watch_health();
    let weak = Arc::downgrade(inner);
    rt.spawn(async move {
        let mut was = rx.borrow_and_update().clone();
        // Ends when the store's writer is gone with the store.
        while rx.changed().await.is_ok() {
            let now = rx.borrow_and_update().clone();
            let Some(inner) = weak.upgrade() else { return };
            match (&was, &now) {
                (StoreHealth::Ok, StoreHealth::Degraded { since, reason }) => degraded(&inner, since, reason),
                (StoreHealth::Degraded { since, reason }, StoreHealth::Ok) => {
                    recovered(&inner, since, reason)
                }
                _ => {}
            }
            was = now;
        }
    });
}

fn clock(t: &DateTime<Utc>) -> String {
    t.format("%H:%M:%S UTC").to_string()
}

/// What ends a job's store note: the intervals before it say when.
const MARKED: &str = "; lines lost then are marked in the logs";
/// The start of the interval still open in a note.
const OPEN: &str = "cannot be written since ";

/// Note on every job under way which it is, and tell each with an event.
/// A job's card keeps every interval it lived through, oldest first.
fn degraded(inner: &Inner, since: &DateTime<Utc>, reason: &str) {
    let open = format!(
        "{OPEN}{} ({reason}), the newest output held in memory{MARKED}",
        clock(since)
    );
    let jobs = note_active(inner, |had| {
        Some(match had.and_then(|h| h.strip_suffix(MARKED)) {
            Some(before) => format!("{before}; {open}"),
            None => open.clone(),
        })
    });
    for id in jobs {
        inner.events.emit(
            id,
            EventKind::StoreDegraded {
                reason: reason.to_string(),
            },
        );
    }
}

fn recovered(inner: &Inner, since: &DateTime<Utc>, reason: &str) {
    let closed = format!(
        "could not be written from {} to {} ({reason}){MARKED}",
        clock(since),
        clock(&Utc::now())
    );
    let jobs = note_active(inner, |had| {
        let had = had?;
        Some(match had.rfind(OPEN) {
            Some(at) => format!("{}{closed}", &had[..at]),
            None => closed.clone(),
        })
    });
    for id in jobs {
        inner.events.emit(id, EventKind::StoreRecovered);
    }
}

/// Set the store note of every job under way to what `note` makes of its
/// current one (`None`: leave it); the jobs whose note was set.
fn note_active(inner: &Inner, note: impl Fn(Option<&String>) -> Option<String>) -> Vec<JobId> {
    let mut reg = inner.registry.lock().unwrap();
    let mut touched = Vec::new();
    for e in reg.jobs.values_mut().filter(|e| e.info.status.is_active()) {
        if let Some(n) = note(e.info.store_note.as_ref()) {
            e.info.store_note = Some(n);
            touched.push(e.info.id.clone());
        }
    }
    touched
}
