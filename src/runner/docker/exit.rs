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

/// After the output ended without a wait answer, how often to ask inspect.
const FALLBACK_POLL: Duration = Duration::from_millis(250);
/// Most of a container's first stderr line held back to recognise the
/// init's "not in the image" words.
const FIRST_LINE_MAX: usize = 4096;
/// After the engine reported the exit, how long the output may take to drain.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);
/// How long an exit 137 berth did not cause waits for the engine to say it
/// was an OOM kill (its OOM event can trail the exit).
const OOM_SETTLE: Duration = Duration::from_millis(500);

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

/// Copy the attach stream into the job's writers until it ends. Returns the
/// stream error, if it ended with one.
pub(super) async fn pump(
    mut stream: OutputStream,
    mut out: StreamWriter,
    mut err: StreamWriter,
    image: Option<String>,
) -> Option<String> {
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
    out.finish();
    err.finish();
    failure
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
    pump: JoinHandle<Option<String>>,
    job: JobId,
) -> Exit {
    let exit = observe(docker, &control, wait, pump, job).await;
    control.close_net();
    exit
}

async fn observe(
    docker: DockerClient,
    control: &DockerControl,
    mut wait: JoinHandle<Waited>,
    mut pump: JoinHandle<Option<String>>,
    job: JobId,
) -> Exit {
    let mut code: Option<i64> = None;
    let mut wait_failure: Option<String> = None;
    let mut wait_done = false;
    let mut pump_done = false;
    let mut stream_failure: Option<String> = None;
    let cid = control.container_id.clone();

    while code.is_none() || !pump_done {
        // Inspect stands in for `wait` when the output ended without an
        // answer, or when the wait request itself failed.
        let fallback = code.is_none() && (pump_done || wait_done);
        tokio::select! {
            r = &mut wait, if !wait_done => {
                wait_done = true;
                match r {
                    Ok(Waited::Code(c)) => code = Some(c),
                    Ok(Waited::Failed(m)) => wait_failure = Some(m),
                    Err(e) => wait_failure = Some(format!("wait task failed: {e}")),
                }
            }
            r = &mut pump, if !pump_done => {
                pump_done = true;
                stream_failure = r.unwrap_or_else(|e| Some(format!("output task failed: {e}")));
            }
            _ = tokio::time::sleep(FALLBACK_POLL), if fallback => {
                match docker.inspect_container(&cid).await {
                    Ok(i) => {
                        let state = i.state.as_ref();
                        let running = state.and_then(|s| s.running).unwrap_or(false)
                            || state.and_then(|s| s.restarting).unwrap_or(false);
                        if !running {
                            tracing::debug!(job = %job, "exit read from inspect (no wait answer)");
                            code = Some(state.and_then(|s| s.exit_code).unwrap_or(-1));
                        }
                    }
                    Err(e) => {
                        // The engine or the container is gone: nothing more will come.
                        pump.abort();
                        let reason = wait_failure
                            .or(stream_failure)
                            .unwrap_or_else(|| e.engine_reason());
                        return Exit::Lost(format!("lost the container: {reason}"));
                    }
                }
            }
            _ = tokio::time::sleep(DRAIN_LIMIT), if code.is_some() && !pump_done => {
                tracing::warn!(job = %job, "container exited but its output did not end within {DRAIN_LIMIT:?}; stopped reading");
                // Aborting drops the writers, which flush and close their streams.
                pump.abort();
                pump_done = true;
            }
        }
    }
    let code = code.unwrap_or(-1);
    if code > 128 {
        // A kill by the kernel's OOM killer also ends in 137; only inspect
        // tells, and the engine learns of the OOM from its own event, which
        // can come a moment after the exit: a 137 berth did not send is
        // looked at a few times over OOM_SETTLE.
        let unexplained = code == 137 && !control.was_sent(9);
        let deadline = tokio::time::Instant::now() + OOM_SETTLE;
        loop {
            let oom = match docker.inspect_container(&cid).await {
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
                if docker.had_oom(&cid).await.unwrap_or(false) {
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
        assert!(pump(stream, o, e, Some("img:1".into())).await.is_none());
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
