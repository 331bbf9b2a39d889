//! A swarm job's output and end, under the runner contract: the exit
//! future resolves once the task reached a terminal state **and** its
//! output went through the job's writers.
//!
//! The service's log follow never ends on its own (measured: it stays
//! open after the task exited), so it cannot say when the output is
//! complete. It feeds the writers while the task runs (a `--ready-log`
//! wait sees lines as they come); once the task ended, the follow is
//! dropped and the log is read once more from its start without follow,
//! which ends, the lines already taken skipped ([`StreamWriter::rewind`]).
//! A task whose node went down has no log any more: what the follow took
//! is what the job keeps, and it ends `lost` naming the node.
//!
//! A `layer` job's stdout carries its workspace's archive at the end
//! (`readback.rs`): its lines are taken out before the writers, and the
//! final read's are decoded into [`Back`] for the control's `collect`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bollard::container::LogOutput;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::readback::Frame;
use super::task::{self, Placed, RUN_POLL, START_POLL};
use crate::output::StreamWriter;
use crate::runner::Exit;
use crate::runner::docker::DockerClient;

/// A `layer` job's workspace archive once it ended, or why there is none.
pub type Back = Arc<std::sync::Mutex<Option<Result<Vec<u8>, String>>>>;

/// The job's two writers, and a `layer` job's frame.
pub struct Writers {
    pub out: StreamWriter,
    pub err: StreamWriter,
    pub frame: Option<Frame>,
}

impl Writers {
    async fn take(&mut self, item: LogOutput) {
        let (w, frame, bytes) = match item {
            LogOutput::StdErr { message } => (&mut self.err, None, message),
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                (&mut self.out, self.frame.as_mut(), message)
            }
            LogOutput::StdIn { .. } => return,
        };
        w.ready().await;
        match frame {
            Some(frame) => frame.split(&bytes, |b| w.write(b)),
            None => w.write(&bytes),
        }
    }
}

/// Feed the service's log into `writers` until `stop`; hand them back.
async fn follow(
    docker: DockerClient,
    service: String,
    mut writers: Writers,
    stop: CancellationToken,
) -> Writers {
    let mut logs = docker.service_logs(&service, true);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            item = logs.next() => match item {
                Some(Ok(item)) => writers.take(item).await,
                // The manager stopped answering: the final read mends it.
                Some(Err(_)) | None => {
                    stop.cancelled().await;
                    break;
                }
            },
        }
    }
    writers
}

/// The job's end: poll the task until it ended, then complete its output.
pub async fn watch(
    docker: DockerClient,
    service: String,
    placed: Placed,
    writers: Writers,
    stopped: Arc<AtomicBool>,
    back: Back,
) -> Exit {
    let stop = CancellationToken::new();
    let following = tokio::spawn(follow(docker.clone(), service.clone(), writers, stop.clone()));
    // Asked often at first (a short job's end is its caller's wait), less
    // as it runs on.
    let mut pause = START_POLL;
    let exit = loop {
        match task::ended(&docker, &placed, stopped.load(Ordering::SeqCst)).await {
            Ok(Some(exit)) => break exit,
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, "could not ask after the job's task; asking again"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RUN_POLL);
    };
    tracing::debug!(%service, ?exit, "swarm task ended");
    stop.cancel();
    let Ok(mut writers) = following.await else {
        return exit;
    };
    if !matches!(exit, Exit::Lost(_)) {
        read_to_end(&docker, &service, &mut writers).await;
    }
    if let Some(frame) = writers.frame.take() {
        let archive = match &exit {
            Exit::Lost(why) => Err(format!(
                "its task was lost before it sent its workspace back ({why})"
            )),
            _ => frame.archive(),
        };
        *back.lock().unwrap_or_else(|e| e.into_inner()) = Some(archive);
    }
    tracing::debug!(%service, "swarm task's output read");
    writers.out.finish();
    writers.err.finish();
    exit
}

/// Read the whole service log once more, without follow, into `writers`
/// (what they took already skipped). The manager gathers a finished
/// task's log from its node and may end the read with an error when the
/// node did not answer in time ("incomplete log stream"): the read is
/// tried again, from the start, a few times before what the follow took
/// is all the job keeps.
async fn read_to_end(docker: &DockerClient, service: &str, writers: &mut Writers) {
    let mut pause = std::time::Duration::from_millis(100);
    for attempt in 1..=READ_TRIES {
        writers.out.rewind();
        writers.err.rewind();
        if let Some(frame) = &mut writers.frame {
            frame.restart(true);
        }
        let mut logs = docker.service_logs(service, false);
        let mut failed = None;
        while let Some(item) = logs.next().await {
            match item {
                Ok(item) => writers.take(item).await,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let Some(e) = failed else { return };
        tracing::warn!(error = %e, attempt, "the job's log could not be read to its end");
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
}

/// How often the final read of a finished task's log is tried.
const READ_TRIES: u32 = 4;
