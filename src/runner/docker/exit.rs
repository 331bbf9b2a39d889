//! How a container job's end is observed, under the runner contract: the exit
//! future resolves only once the engine reported the exit **and** the attach
//! stream has ended, i.e. every byte went through the job's stream writers.
//!
//! Measured on Debian's 20.10: the `wait` answer always comes, but under
//! load (several containers exiting at once) the attach stream can end
//! ~300 ms before it while the engine tears down the container's network,
//! and nothing tells us the wait request was registered before start. So
//! once the output has ended without a wait answer, inspect stands in: a
//! stopped container's `State.ExitCode` is the same answer, and a container
//! or engine that is gone means `Lost`. A container killed by a signal we
//! sent exits 128+N through its init; that is reported as `Signal(N)`.

mod follow;

use std::time::Duration;

use super::DockerClient;
use bollard::container::LogOutput;
use bollard::query_parameters::WaitContainerOptions;
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use super::DockerControl;
use crate::model::JobId;
use crate::output::StreamWriter;
use crate::runner::Exit;
use follow::Following;

/// After the output ended without a wait answer, how often to ask inspect.
pub(super) const FALLBACK_POLL: Duration = Duration::from_millis(250);
/// Most of a container's first stderr line held back to recognise the
/// init's "not in the image" words.
const FIRST_LINE_MAX: usize = 4096;
/// After the engine reported the exit, how long the output may take to drain.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);
/// How long an exit 137 berth did not cause waits for the engine to say it
/// was an OOM kill (its OOM event can trail the exit: by more than 500 ms
/// once, in CI, with the whole suite beside it). Only an unexplained 137
/// waits, and a kill from outside berth is rare beside an OOM.
const OOM_SETTLE: Duration = Duration::from_secs(2);

pub(super) use super::client::OutputStream;

/// What the `wait` request said.
pub(super) enum Waited {
    Code(i64),
    /// The request failed (engine gone, container removed); inspect decides.
    Failed(String),
}

/// The `wait` request (condition next-exit): one answer with the exit code.
pub(super) async fn wait_exit(docker: DockerClient, cid: String) -> Waited {
    let opts = WaitContainerOptions {
        condition: "next-exit".into(),
    };
    let mut answers = std::pin::pin!(docker.wait_container(&cid, opts));
    match answers.next().await {
        Some(Ok(code)) => Waited::Code(code),
        Some(Err(e)) => Waited::Failed(e.engine_reason()),
        None => Waited::Failed("the engine closed the wait request without an answer".into()),
    }
}

/// The job's two stream writers, handed from one output task to the next:
/// a re-attach reads the container's output again into the same writers.
pub(super) struct Writers {
    pub out: StreamWriter,
    pub err: StreamWriter,
}

impl Writers {
    /// The output is read again from its start (see [`StreamWriter::rewind`]).
    pub(super) fn rewind(&mut self) {
        self.out.rewind();
        self.err.rewind();
    }

    /// The container's end is known and its output drained.
    pub(super) fn finish(self) {
        self.out.finish();
        self.err.finish();
    }
}

/// How an output task ended: the stream's error, if any, and the writers,
/// not finished: an attach stream ends the same when its container exits
/// and when the engine's connection breaks, so only the exit future, once
/// the container's end is known, finishes them.
pub(super) struct Pumped {
    pub failure: Option<String>,
    pub writers: Writers,
}

/// Copy the attach stream into the job's writers until it ends.
pub(super) async fn pump(mut stream: OutputStream, writers: Writers, image: Option<String>) -> Pumped {
    let Writers { mut out, mut err } = writers;
    let mut failure = None;
    // The init's own words for a program the image lacks are the first line
    // on stderr; it may come in several chunks, so the first line is held
    // (up to FIRST_LINE_MAX bytes) and said berth's way when it is that.
    let mut first_line: Option<Vec<u8>> = image.as_ref().map(|_| Vec::new());
    let settle = |held: Vec<u8>, err: &mut StreamWriter| {
        let cut = held
            .iter()
            .position(|b| *b == b'\n')
            .map_or(held.len(), |n| n + 1);
        let (first, rest) = held.split_at(cut);
        match image.as_deref().and_then(|i| not_in_image(first, i)) {
            Some(line) => err.write(line.as_bytes()),
            None => err.write(first),
        }
        err.write(rest);
    };
    while let Some(item) = stream.next().await {
        // As a pipe would: a store that cannot take more, or a foreground
        // reader far behind, holds the container's output up (the engine
        // stops reading it), not this worker thread.
        match &item {
            Ok(LogOutput::StdErr { .. }) => err.ready().await,
            Ok(_) => out.ready().await,
            Err(_) => {}
        }
        match item {
            Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => out.write(&message),
            Ok(LogOutput::StdErr { message }) => match first_line.as_mut() {
                Some(held) => {
                    held.extend_from_slice(&message);
                    if held.contains(&b'\n') || held.len() >= FIRST_LINE_MAX {
                        settle(first_line.take().unwrap_or_default(), &mut err);
                    }
                }
                None => err.write(&message),
            },
            Ok(LogOutput::StdIn { .. }) => {}
            Err(e) => {
                failure = Some(e.engine_reason());
                break;
            }
        }
    }
    if let Some(held) = first_line.filter(|h| !h.is_empty()) {
        settle(held, &mut err);
    }
    Pumped {
        failure,
        writers: Writers { out, err },
    }
}

/// `[FATAL tini (7)] exec make failed: No such file or directory` (what the
/// container's init says when the program is not in the image, exit 127),
/// or `… failed: Permission denied` / `Exec format error` (a file that is
/// not executable, as the host runner says it), as one line saying what to do.
pub(super) fn not_in_image(message: &[u8], image: &str) -> Option<String> {
    let text = std::str::from_utf8(message).ok()?;
    let rest = text.strip_prefix("[FATAL tini (")?;
    let rest = &rest[rest.find(")] exec ")? + ")] exec ".len()..];
    let (program, why) = rest.split_once(" failed: ")?;
    let e = if why.starts_with("No such file or directory") {
        crate::error::Error::NotInImage {
            program: program.into(),
            image: image.into(),
        }
    } else if why.starts_with("Permission denied") || why.starts_with("Exec format error") {
        crate::error::Error::NotExecutable {
            program: program.into(),
            path: program.into(),
        }
    } else {
        return None;
    };
    Some(format!("berth: {e}\n"))
}

/// Resolves once the engine reported the exit and the output is drained;
/// what berth ran for the job on this machine (its forwarded ports, its
/// egress proxy) is closed by then.
pub(super) async fn exit_future(
    docker: DockerClient,
    control: DockerControl,
    wait: JoinHandle<Waited>,
    pump: JoinHandle<Pumped>,
    job: JobId,
) -> Exit {
    let exit = observe(docker, &control, wait, pump, job).await;
    control.close_net();
    exit
}

/// Await `task` while there is one; never resolves without.
async fn joined<T>(task: &mut Option<JoinHandle<T>>) -> Result<T, tokio::task::JoinError> {
    match task {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}

async fn observe(
    docker: DockerClient,
    control: &DockerControl,
    wait: JoinHandle<Waited>,
    pump: JoinHandle<Pumped>,
    job: JobId,
) -> Exit {
    let mut f = Following::new(wait, pump);
    while f.code.is_none() || f.pump.is_some() {
        // Inspect stands in for `wait` when the output ended without an
        // answer, or when the wait request itself failed; it also tells
        // when an engine that stopped answering is back (`exit/follow.rs`).
        let fallback = f.code.is_none() && (f.pump.is_none() || f.wait.is_none());
        tokio::select! {
            r = joined(&mut f.wait) => {
                f.wait = None;
                match r {
                    Ok(Waited::Code(c)) => f.code = Some(c),
                    Ok(Waited::Failed(m)) => f.broke(m),
                    Err(e) => f.broke(format!("wait task failed: {e}")),
                }
            }
            r = joined(&mut f.pump) => {
                f.pump = None;
                match r {
                    Ok(Pumped { failure, writers }) => {
                        f.writers = Some(writers);
                        if let Some(m) = failure {
                            f.broke(m);
                        }
                    }
                    Err(e) => f.broke(format!("output task failed: {e}")),
                }
            }
            _ = tokio::time::sleep(f.poll), if fallback => {
                if let Some(exit) = f.check(&docker, control, &job).await {
                    return exit;
                }
            }
            _ = tokio::time::sleep(DRAIN_LIMIT), if f.code.is_some() && f.pump.is_some() => {
                tracing::warn!(job = %job, "container exited but its output did not end within {DRAIN_LIMIT:?}; stopped reading");
                // Aborting drops the writers, which flush and close their streams.
                if let Some(p) = f.pump.take() {
                    p.abort();
                }
            }
        }
    }
    if let Some(w) = f.wait.take() {
        w.abort();
    }
    if let Some(w) = f.writers.take() {
        w.finish();
    }
    exit_of(&docker, control, f.code.unwrap_or(-1)).await
}

/// The exit that `code` (the engine's exit code) stands for.
async fn exit_of(docker: &DockerClient, control: &DockerControl, code: i64) -> Exit {
    let cid = &control.container_id;
    if code > 128 {
        // A kill by the kernel's OOM killer also ends in 137; only inspect
        // tells, and the engine learns of the OOM from its own event, which
        // can come a moment after the exit: a 137 berth did not send is
        // looked at a few times over OOM_SETTLE.
        let unexplained = code == 137 && !control.was_sent(9);
        let deadline = tokio::time::Instant::now() + OOM_SETTLE;
        loop {
            let oom = match docker.inspect_container(cid).await {
                Ok(i) => i.state.as_ref().and_then(|s| s.oom_killed).unwrap_or(false),
                Err(_) => break,
            };
            if oom {
                return Exit::Oom;
            }
            if !unexplained {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                // The engine can record the OOM event and then let the exit
                // overwrite its flag: its event log still says so.
                if docker.had_oom(cid).await.unwrap_or(false) {
                    return Exit::Oom;
                }
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let signal = (code - 128) as i32;
        if control.was_sent(signal) {
            return Exit::Signal(signal);
        }
    }
    Exit::Code(code as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventLog;
    use crate::output::{JobOutput, LogQuery, Stream as OutStream};
    use crate::store::Store;
    use crate::watch::Watchers;

    /// The attach stream as `chunks` of stderr, pumped into a fresh job output;
    /// the stderr lines that come out.
    async fn pumped(chunks: &[&str]) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("berth.db")).unwrap();
        let out = JobOutput::create(
            JobId::from_number(1),
            &dir.path().join("job-1"),
            4096,
            Watchers::default(),
            EventLog::new(),
            store,
            1,
        )
        .unwrap();
        let items: Vec<crate::Result<LogOutput>> = chunks
            .iter()
            .map(|c| {
                Ok(LogOutput::StdErr {
                    message: bytes::Bytes::from(c.to_string()),
                })
            })
            .collect();
        let stream: OutputStream = Box::pin(futures_util::stream::iter(items));
        let (o, e) = (
            out.writer(OutStream::Stdout).unwrap(),
            out.writer(OutStream::Stderr).unwrap(),
        );
        let pumped = pump(stream, Writers { out: o, err: e }, Some("img:1".into())).await;
        assert!(pumped.failure.is_none());
        pumped.writers.finish();
        let page = out.read(&LogQuery::default()).unwrap();
        page.lines.into_iter().map(|l| l.text).collect()
    }

    #[tokio::test]
    async fn the_inits_words_are_said_berths_way_even_in_pieces() {
        let said = "berth: `make` is not in image img:1; choose an image with the tool (--image, image in berth.toml) or run with --runner host";
        let whole = pumped(&["[FATAL tini (7)] exec make failed: No such file or directory\n"]).await;
        assert_eq!(whole, [said]);
        let pieces = pumped(&[
            "[FATAL tini (7)] exec ma",
            "ke failed: No such file",
            " or directory\nnext\n",
        ])
        .await;
        assert_eq!(pieces, [said, "next"]);
        let denied = pumped(&["[FATAL tini (7)] exec ./run.sh failed: Permission denied\n"]).await;
        assert_eq!(
            denied,
            [
                "berth: cannot run `./run.sh`: ./run.sh is not an executable file (check its mode, or run it through its interpreter)"
            ]
        );
        let other = pumped(&["an ordinary", " line\n", "more\n"]).await;
        assert_eq!(other, ["an ordinary line", "more"]);
    }
}
