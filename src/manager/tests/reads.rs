//! A job the registry has let go is read back from the store, and the
//! faces' async reads of it (`read_info`, `read_snippet`, lists) wait for
//! the store on the blocking pool: while a long page read holds the
//! store's reader, the async worker goes on serving everything else.

use std::sync::mpsc;
use std::time::Duration;

use super::{bench, job};
use crate::manager::ListFilter;
use crate::manager::finished::IN_MEMORY;
use crate::model::{JobId, JobStatus};
use crate::output::Stream;

/// A manager whose first job (it printed `first line`) was let go: more
/// than [`IN_MEMORY`] jobs ended after it.
async fn one_let_go() -> (super::Bench, JobId) {
    let b = bench(3);
    let mut first = None;
    for i in 0..=IN_MEMORY {
        let handle = b.manager.start(job("quick")).await.unwrap();
        let fake = b.fake.next_launch().await;
        if i == 0 {
            fake.emit(Stream::Stdout, "first line\n");
        }
        fake.exit(0);
        assert_eq!(
            handle.wait_end().await.unwrap().status,
            JobStatus::Exited { code: 0 }
        );
        first.get_or_insert(handle.id.clone());
    }
    let first = first.unwrap();
    assert!(
        !b.manager.inner.registry.lock().unwrap().jobs.contains_key(&1),
        "the first job should have been let go"
    );
    (b, first)
}

/// While another thread holds the store's reader, `read` (spawned on this
/// current-thread runtime) must leave the runtime free: this task runs on
/// and says so before the reader is let go (after at most 5 s).
async fn runs_on_while_the_reader_is_held<T: Send + 'static>(
    b: &super::Bench,
    read: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    let store = b.manager.inner.store.clone();
    let (held_tx, held_rx) = mpsc::channel();
    let (alive_tx, alive_rx) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let _reader = store.hold_reader();
        held_tx.send(()).unwrap();
        alive_rx.recv_timeout(Duration::from_secs(5)).is_ok()
    });
    held_rx.recv().unwrap();
    let read = tokio::spawn(read);
    // Let the read run up to where it waits.
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    let _ = alive_tx.send(());
    assert!(
        holder.join().unwrap(),
        "the async worker waited for the store's reader"
    );
    read.await.unwrap()
}

#[tokio::test]
async fn a_let_go_job_is_read_from_the_store_off_the_async_worker() {
    let (b, first) = one_let_go().await;
    let (m, id) = (b.manager.clone(), first.clone());
    let info = runs_on_while_the_reader_is_held(&b, async move { m.read_info(&id).await }).await;
    assert_eq!(info.unwrap().status, JobStatus::Exited { code: 0 });
    let (m, id) = (b.manager.clone(), first.clone());
    let snippet = runs_on_while_the_reader_is_held(&b, async move { m.read_snippet(&id).await }).await;
    assert_eq!(snippet.unwrap().trim(), "first line");
    let m = b.manager.clone();
    let all =
        runs_on_while_the_reader_is_held(&b, async move { m.off_worker(|m| m.list(ListFilter::All)).await })
            .await;
    assert_eq!(all.len(), IN_MEMORY + 1);
    assert_eq!(all.first().map(|j| &j.id), Some(&first));
}
