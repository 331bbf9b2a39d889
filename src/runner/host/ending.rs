//! A host job's output and end: both pipes pumped into the job's streams
//! from the start, and once the leader (the shim) exited, leftovers of the
//! group ended, the pid marked reaped, and the pipes drained for at most
//! [`DRAIN_LIMIT`] before they are closed whatever holds them.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;
use tokio::task::JoinHandle;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::super::Exit;
use super::super::host_ports::Reservation;
use super::{DRAIN_LIMIT, HostControl, LEFTOVER_GRACE};
use crate::error::Result;
use crate::output::{JobOutput, Stream};

/// Kernel buffer asked for each output pipe (the default is 64 KiB): a
/// burst of output waits in the pipe rather than in the job, and each read
/// takes more at once. Best effort: the per-user pipe budget may refuse it.
const PIPE_BYTES: i32 = 1 << 20;
/// Most bytes taken from a pipe per chunk of lines: under 128 KiB, the size
/// from which glibc maps blocks of their own (a freed one raises that bound
/// for good, and blocks that size then stay in the daemon's heaps).
const READ_BYTES: usize = 64 * 1024;

/// The two pumps of a job's output, and how to tell them to stop reading.
pub(super) struct Pumps {
    out_task: JoinHandle<()>,
    err_task: JoinHandle<()>,
    stop_tx: tokio::sync::watch::Sender<bool>,
}

impl Pumps {
    /// Pump the child's stdout and stderr into `output`'s streams.
    pub fn start(child: &mut Child, output: &Arc<JobOutput>) -> Result<Pumps> {
        // Open both writers before reading so a failure cannot leave one half set up.
        let out_writer = output.writer(Stream::Stdout);
        let err_writer = output.writer(Stream::Stderr);
        let (out_writer, err_writer) = match (out_writer, err_writer) {
            (Ok(o), Ok(e)) => (o, e),
            (Err(e), _) | (_, Err(e)) => return Err(e),
        };
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        widen(&stdout);
        widen(&stderr);
        // Told to stop reading once the job is over and the drain time is up.
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let out_task = tokio::spawn(pump(stdout, out_writer, stop_rx.clone()));
        let err_task = tokio::spawn(pump(stderr, err_writer, stop_rx));
        Ok(Pumps {
            out_task,
            err_task,
            stop_tx,
        })
    }
}

/// The job's end: waits for the leader, ends what is left of the group,
/// drains the output under its bound, and says how the leader ended.
/// `exited` is dropped as the leader exits (a held stdin closes);
/// `reservation` holds the job's host ports until then.
pub(super) async fn observe(
    mut child: Child,
    control: HostControl,
    shimmed: bool,
    pumps: Pumps,
    exited: tokio::sync::oneshot::Sender<()>,
    reservation: Reservation,
) -> Exit {
    let status = child.wait().await;
    drop(exited);
    let _reservation = reservation;
    let Pumps {
        out_task,
        err_task,
        stop_tx,
    } = pumps;
    let drains = async {
        let _ = out_task.await;
        let _ = err_task.await;
    };
    let mut drains = std::pin::pin!(drains);
    // A finished future must not be polled again (it panics): remember
    // whether the grace below already saw the pipes drained.
    let mut drained = false;
    if !shimmed {
        // No shim ended the leftovers: what is left of the group gets a
        // short grace after SIGTERM.
        let _ = killpg(Pid::from_raw(control.pgid), Signal::SIGTERM);
        drained = tokio::time::timeout(LEFTOVER_GRACE, &mut drains).await.is_ok();
    }
    // The shim ended the tree below it; anything still in the group (the
    // shim itself was killed from outside) goes now, before the pid is
    // marked reaped and may be reused.
    let _ = killpg(Pid::from_raw(control.pgid), Signal::SIGKILL);
    control.reaped.store(true, std::sync::atomic::Ordering::SeqCst);
    if !drained && tokio::time::timeout(DRAIN_LIMIT, &mut drains).await.is_err() {
        tracing::warn!(
            pgid = control.pgid,
            "output pipes still open after the job ended; stopped reading"
        );
        let _ = stop_tx.send(true);
        drains.await;
    }
    exit_of(status)
}

/// How the leader ended, from its wait status.
fn exit_of(status: std::io::Result<std::process::ExitStatus>) -> Exit {
    match status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            match (s.code(), s.signal()) {
                (Some(c), _) => Exit::Code(c),
                (None, Some(sig)) => Exit::Signal(sig),
                _ => Exit::Lost("no exit status".into()),
            }
        }
        Err(e) => Exit::Lost(format!("wait failed: {e}")),
    }
}

/// A bigger pipe buffer ([`PIPE_BYTES`]), where the pipe budget allows it.
fn widen(pipe: &impl std::os::fd::AsFd) {
    let _ = nix::fcntl::fcntl(pipe, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_BYTES));
}

/// Copy one pipe into its stream until end of file or until told to stop;
/// the pipe is closed when this returns.
async fn pump(
    mut reader: impl AsyncRead + Unpin,
    mut writer: crate::output::StreamWriter,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use futures_util::FutureExt;
    let mut buf = vec![0u8; READ_BYTES];
    loop {
        let mut n = tokio::select! {
            read = reader.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            _ = stop.wait_for(|s| *s) => break,
        };
        // Take what else is in the pipe already: one chunk of lines (and one
        // store write) per burst, not per write the job made. End of file or
        // an error shows on the next read.
        while n < buf.len() {
            match reader.read(&mut buf[n..]).now_or_never() {
                Some(Ok(m)) if m > 0 => n += m,
                _ => break,
            }
        }
        writer.ready().await;
        writer.write(&buf[..n]);
    }
    drop(reader);
    writer.finish();
}
