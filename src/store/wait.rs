//! Waiting on the queue's futures from a plain thread, for at most a bounded
//! time: the writer thread waits for the next write (or its batching
//! deadline), and a blocking producer waits for room in the queue or for the
//! writer's answer to a flush, each with the deadline that keeps a hung disk
//! from holding it for good. Tokio's `blocking_recv`/`blocking_send` take no
//! deadline, and `tokio::time` needs a runtime these threads may not have: the
//! thread parks until the future's waker unparks it or the deadline passes.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

/// Wakes the thread that waits in [`block_until`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Drive `fut` on this thread until it is ready (`Some`) or `deadline`
/// passes (`None`; no deadline waits for good). Not on an async worker: the
/// caller wraps it in `block_in_place` there (`queue::off_worker`).
pub(super) fn block_until<F: Future>(fut: F, deadline: Option<Instant>) -> Option<F::Output> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    // Unconstrained: on a task that spent its cooperative budget, tokio's
    // channels would answer `Pending` at once and this loop would spin.
    let mut fut = std::pin::pin!(tokio::task::unconstrained(fut));
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Some(out);
        }
        // An unpark that came before this park makes it return at once: no
        // wake-up is lost between the poll and the park.
        match deadline {
            None => std::thread::park(),
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return None;
                }
                std::thread::park_timeout(left);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_ready_future_answers_and_a_pending_one_gives_up_at_its_deadline() {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(1);
        let started = Instant::now();
        let limit = Duration::from_millis(100);
        assert_eq!(block_until(rx.recv(), Some(started + limit)), None);
        assert!(started.elapsed() >= limit);
        // A send from another thread wakes the waiting one long before its
        // deadline (the pause only makes the receiver likely to park first;
        // the answer does not depend on it).
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.try_send(7).unwrap();
        });
        let started = Instant::now();
        assert_eq!(
            block_until(rx.recv(), Some(started + Duration::from_secs(20))),
            Some(Some(7))
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not woken: {:?}",
            started.elapsed()
        );
        sender.join().unwrap();
        assert_eq!(block_until(rx.recv(), None), Some(None), "closed");
    }
}
