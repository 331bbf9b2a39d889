//! One worker for the engine cleanups that synchronous code must wait for
//! (a `Drop`, recovery's reaping, a manager's teardown), as
//! testcontainers-rs has one for its containers' drops.
//!
//! Such code may itself run on a tokio runtime (whose thread it would
//! block) or on one that is winding down, so the work runs elsewhere: on
//! one thread with a current-thread runtime of its own, started on first
//! use and kept for the process. Each piece of work is a task there (a
//! slow removal does not hold up the next), and its caller waits for its
//! answer at most the caller's limit: past it the work finishes in the
//! background and the caller gets `None`. Before, each such call made a
//! thread and a runtime of its own.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The worker's queue; `None` when it could not be started (no thread or
/// runtime to be had), said once in the log.
fn queue() -> Option<&'static UnboundedSender<Work>> {
    static QUEUE: OnceLock<Option<UnboundedSender<Work>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Work>();
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            let started = runtime.map_err(|e| e.to_string()).and_then(|rt| {
                std::thread::Builder::new()
                    .name("berth-drop-worker".into())
                    .spawn(move || {
                        rt.block_on(async move {
                            while let Some(work) = rx.recv().await {
                                tokio::spawn(work);
                            }
                        })
                    })
                    .map_err(|e| e.to_string())
            });
            match started {
                Ok(_) => Some(tx),
                Err(e) => {
                    tracing::warn!(error = %e, "no worker for engine cleanups; they are skipped");
                    None
                }
            }
        })
        .as_ref()
}

/// Run `work` on the drop worker and wait for its answer at most `limit`
/// (`None` past it, or when there is no worker). Safe to call from inside
/// a runtime: the caller's thread only waits on a channel.
pub fn run<T, F>(limit: Duration, work: F) -> Option<T>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let job: Work = Box::pin(async move {
        let _ = tx.send(work.await);
    });
    queue()?.send(job).ok()?;
    rx.recv_timeout(limit).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_come_back_and_a_slow_one_holds_up_no_other() {
        // A slow piece of work that outlives its caller's limit…
        let slow = run(Duration::from_millis(10), async {
            tokio::time::sleep(Duration::from_secs(120)).await;
            1
        });
        assert_eq!(slow, None, "past its limit: None");
        // …does not hold up the next one, which answers.
        assert_eq!(run(Duration::from_secs(30), async { 2 }), Some(2));
    }

    #[tokio::test]
    async fn it_can_be_waited_for_from_inside_a_runtime() {
        assert_eq!(run(Duration::from_secs(30), async { "done" }), Some("done"));
    }
}
