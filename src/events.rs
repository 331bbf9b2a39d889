//! The event log: everything that happens to jobs (started, ready, watch hits,
//! promotions, ends) as one stream with a global `seq`, so a client can ask for
//! "everything since N" and never miss or repeat one. The log keeps the most
//! recent [`MAX_EVENTS`] in memory and broadcasts each new event to followers
//! (SSE, the TUI, readiness waiters). Events persist through
//! [`EventStore`] (the store implements it), so older ones are read back
//! after they left memory or a restart.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use tokio::sync::broadcast;

use crate::model::JobId;
pub use crate::model::{Event, EventKind};
use crate::persist::EventStore;

/// How many events are kept in memory.
pub const MAX_EVENTS: usize = 10_000;

struct State {
    events: VecDeque<Event>,
    next_seq: u64,
}

/// The shared log of events.
pub struct EventLog {
    state: Mutex<State>,
    tx: broadcast::Sender<Event>,
    /// Where every event is kept for good (older ones are read back from it).
    store: Option<Arc<dyn EventStore>>,
}

impl EventLog {
    pub fn new() -> Arc<Self> {
        Self::starting_at(1)
    }

    /// A log whose first event gets `seq` (after a restart, to keep seqs unique).
    pub fn starting_at(seq: u64) -> Arc<Self> {
        Self::build(seq, None)
    }

    /// A log that persists every event in `store` and continues its seq.
    pub fn with_store(store: Arc<dyn EventStore>) -> crate::error::Result<Arc<Self>> {
        let next = store.max_event_seq()? + 1;
        Ok(Self::build(next, Some(store)))
    }

    fn build(seq: u64, store: Option<Arc<dyn EventStore>>) -> Arc<Self> {
        let (tx, _) = broadcast::channel(4096);
        Arc::new(EventLog {
            state: Mutex::new(State {
                events: VecDeque::new(),
                next_seq: seq.max(1),
            }),
            tx,
            store,
        })
    }

    /// Record an event and tell followers.
    pub fn emit(&self, job: JobId, kind: EventKind) -> Event {
        let event = {
            let mut st = self.state.lock().unwrap();
            let event = Event {
                seq: st.next_seq,
                ts: Utc::now(),
                job,
                kind,
            };
            st.next_seq += 1;
            if let Some(store) = &self.store {
                store.put_event(&event);
            }
            st.events.push_back(event.clone());
            if st.events.len() > MAX_EVENTS {
                st.events.pop_front();
            }
            // Send under the lock so followers see events in seq order.
            let _ = self.tx.send(event.clone());
            event
        };
        tracing::debug!(seq = event.seq, job = %event.job, kind = event.kind.name(), "event");
        event
    }

    /// Events with `seq >= since`, oldest first, at most `limit`.
    pub fn since(&self, since: u64, limit: usize) -> Vec<Event> {
        let (first_in_memory, next) = {
            let st = self.state.lock().unwrap();
            (
                st.events.front().map(|e| e.seq).unwrap_or(st.next_seq),
                st.next_seq,
            )
        };
        let mut out = Vec::new();
        if since < first_in_memory
            && let Some(store) = &self.store
        {
            // Older than memory (or from before a restart): read them back.
            store.flush();
            out = store.events(since, limit).unwrap_or_default();
        }
        let from = out.last().map(|e| e.seq + 1).unwrap_or(since);
        if out.len() < limit && from < next {
            let st = self.state.lock().unwrap();
            out.extend(
                st.events
                    .iter()
                    .filter(|e| e.seq >= from)
                    .take(limit - out.len())
                    .cloned(),
            );
        }
        out
    }

    /// Seq the next event will get.
    pub fn next_seq(&self) -> u64 {
        self.state.lock().unwrap().next_seq
    }

    /// Follow new events. Subscribe before reading `since` to miss nothing
    /// (dedupe by seq).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_is_global_and_since_is_inclusive() {
        let log = EventLog::new();
        let mut rx = log.subscribe();
        log.emit(JobId::from_number(1), EventKind::Queued);
        log.emit(JobId::from_number(2), EventKind::Ready { elapsed_ms: 5 });
        let all = log.since(0, 100);
        assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(log.since(2, 100).len(), 1);
        assert_eq!(rx.try_recv().unwrap().seq, 1);
        let json = serde_json::to_value(&all[1]).unwrap();
        assert_eq!(json["kind"], "ready");
        assert_eq!(json["job"], "job-2");
    }

    #[test]
    fn events_persist_and_a_new_log_continues_their_seq_and_reads_them_back() {
        let store = crate::persist::memory::Memory::new();
        let log = EventLog::with_store(store.clone()).unwrap();
        for n in 1..=3 {
            log.emit(JobId::from_number(n), EventKind::Queued);
        }
        // After a restart: the seq goes on, and older events come from the store.
        let log = EventLog::with_store(store).unwrap();
        assert_eq!(log.next_seq(), 4);
        log.emit(JobId::from_number(4), EventKind::Queued);
        let all = log.since(1, 100);
        assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        assert_eq!(all[3].job, JobId::from_number(4));
        assert_eq!(
            log.since(2, 2).iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![2, 3]
        );
    }
}
