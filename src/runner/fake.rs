//! A scripted runner for tests (built for the crate's unit tests and with
//! the `test-util` feature, for tests of code built on berth): its jobs
//! are no processes, so the manager's cap, queue, foreground promotion and
//! kill races are tested without a process table or a container engine.
//!
//! A test installs a [`FakeRunner`] on a manager (which then launches every
//! job through it), gives a command a [`Script`] (how it answers signals, how
//! long a kill takes, whether its launch fails), and drives each launched job
//! from a [`FakeJob`] handle: emit lines, exit with a code. It keeps the real
//! runners' contract: the `exit` future resolves once, after both output
//! streams are closed, however many ends race for it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};

use futures_util::future::BoxFuture;

use super::{Control, Exit, JobControl, Launch, Launched, Runner};
use crate::error::{Error, Result};
use crate::model::{JobId, JobSpec};
use crate::output::{JobOutput, Stream, StreamWriter};

/// How long [`FakeRunner::next_launch`] waits for a launch.
pub const LAUNCH_DEADLINE: Duration = Duration::from_secs(120);

/// How a scripted job behaves.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// A polite signal (anything but SIGKILL) is ignored instead of ending the job.
    pub ignore_signals: bool,
    /// How long the job takes to die after SIGKILL.
    pub kill_delay: Duration,
    /// How long the launch takes (the job is `starting` meanwhile).
    pub launch_delay: Duration,
    /// The launch fails, as a program that cannot be spawned.
    pub fail_launch: bool,
    /// Lines on stdout as soon as the job runs.
    pub lines: Vec<String>,
    /// The exit future panics instead of resolving (a bug in a runner), to
    /// test that the manager still ends the job.
    pub panic_at_exit: bool,
}

/// Launches scripted jobs; shared between a test and the manager under test.
pub struct FakeRunner {
    /// Scripts by program name (the first word of the command).
    scripts: Mutex<HashMap<String, Script>>,
    /// Every launch, in order, as it begins; taken by [`FakeRunner::next_launch`].
    launches: tokio::sync::Mutex<mpsc::UnboundedReceiver<FakeJob>>,
    launches_tx: mpsc::UnboundedSender<FakeJob>,
    /// Jobs launched and not yet ended, and the most there ever were at once.
    alive: Arc<AtomicUsize>,
    most_alive: Arc<AtomicUsize>,
}

impl FakeRunner {
    pub fn new() -> Arc<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        Arc::new(FakeRunner {
            scripts: Mutex::default(),
            launches: tokio::sync::Mutex::new(rx),
            launches_tx: tx,
            alive: Arc::default(),
            most_alive: Arc::default(),
        })
    }

    /// Jobs whose program is `program` follow `script`; others the default one.
    pub fn script(&self, program: &str, script: Script) {
        self.scripts.lock().unwrap().insert(program.into(), script);
    }

    /// The next job whose launch began (in launch order). Panics after
    /// [`LAUNCH_DEADLINE`]: on a paused clock, a launch that never comes
    /// fails the test at once instead of hanging it.
    pub async fn next_launch(&self) -> FakeJob {
        let mut rx = self.launches.lock().await;
        tokio::time::timeout(LAUNCH_DEADLINE, rx.recv())
            .await
            .expect("no launch began within the deadline")
            .expect("the runner keeps its sender")
    }

    /// A launch already begun, if any (never waits).
    pub fn try_next_launch(&self) -> Option<FakeJob> {
        self.launches.try_lock().ok()?.try_recv().ok()
    }

    /// The most jobs that were running at the same time.
    pub fn most_alive(&self) -> usize {
        self.most_alive.load(Ordering::SeqCst)
    }

    /// Launch `spec` as job `id`, writing to `output`.
    pub async fn launch(&self, id: &JobId, spec: &JobSpec, output: &Arc<JobOutput>) -> Result<Launched> {
        let program = spec.effective_argv().first().cloned().unwrap_or_default();
        let script = self
            .scripts
            .lock()
            .unwrap()
            .get(&program)
            .cloned()
            .unwrap_or_default();
        let (exit_tx, exit_rx) = watch::channel(None);
        let (signals_tx, _) = watch::channel(Vec::new());
        let job = FakeJob(Arc::new(JobState {
            id: id.clone(),
            script: script.clone(),
            phase: Mutex::new(Phase::Launching(None)),
            signals: signals_tx,
            exit: exit_tx,
            alive: self.alive.clone(),
        }));
        let _ = self.launches_tx.send(job.clone());
        if !script.launch_delay.is_zero() {
            tokio::time::sleep(script.launch_delay).await;
        }
        if script.fail_launch {
            return Err(Error::Spawn {
                program,
                source: std::io::Error::other("scripted launch failure"),
            });
        }
        let (out, err) = (output.writer(Stream::Stdout)?, output.writer(Stream::Stderr)?);
        let now = self.alive.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_alive.fetch_max(now, Ordering::SeqCst);
        let early = std::mem::replace(
            &mut *job.0.phase.lock().unwrap(),
            Phase::Running(Box::new((out, err))),
        );
        for line in &script.lines {
            job.emit(Stream::Stdout, line);
        }
        // The test ended it while it was still launching.
        if let Phase::Launching(Some(exit)) = early {
            job.0.end(exit);
        }
        let panic_at_exit = script.panic_at_exit;
        let exit = Box::pin(async move {
            let mut rx = exit_rx;
            let exit = rx
                .wait_for(Option::is_some)
                .await
                .expect("the job keeps its sender");
            let exit = exit.clone().expect("waited for Some");
            assert!(!panic_at_exit, "scripted panic at exit");
            exit
        });
        Ok(Launched {
            sweep: None,
            engine: None,
            node: None,
            pid: None,
            container_id: None,
            ports: Vec::new(),
            limits: Default::default(),
            internal_ip: None,
            control: Control::new(FakeControl(job.0.clone())),
            exit,
        })
    }
}

/// Where a scripted job is in its life.
enum Phase {
    /// The launch has begun; an end asked for meanwhile waits for it to finish.
    Launching(Option<Exit>),
    /// Running, with its two stream writers.
    Running(Box<(StreamWriter, StreamWriter)>),
    Ended,
}

struct JobState {
    id: JobId,
    script: Script,
    phase: Mutex<Phase>,
    /// Every signal the job received, in order.
    signals: watch::Sender<Vec<i32>>,
    exit: watch::Sender<Option<Exit>>,
    alive: Arc<AtomicUsize>,
}

impl JobState {
    /// End the job with `exit` unless it already ended: close the streams
    /// first, then publish the exit (the runner contract), all under the
    /// phase lock so a racing end cannot publish in between.
    fn end(&self, exit: Exit) {
        let mut phase = self.phase.lock().unwrap();
        match std::mem::replace(&mut *phase, Phase::Ended) {
            Phase::Launching(early) => *phase = Phase::Launching(early.or(Some(exit))),
            Phase::Running(writers) => {
                let (out, err) = *writers;
                out.finish();
                err.finish();
                self.alive.fetch_sub(1, Ordering::SeqCst);
                self.exit.send_replace(Some(exit));
            }
            Phase::Ended => {}
        }
    }

    fn receive(self: &Arc<Self>, signal: i32) {
        self.signals.send_modify(|s| s.push(signal));
        if signal == Signal::SIGKILL as i32 {
            let delay = self.script.kill_delay;
            if delay.is_zero() {
                self.end(Exit::Signal(signal));
            } else {
                let me = self.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    me.end(Exit::Signal(signal));
                });
            }
        } else if !self.script.ignore_signals {
            self.end(Exit::Signal(signal));
        }
    }
}

/// The test's side of one scripted job.
#[derive(Clone)]
pub struct FakeJob(Arc<JobState>);

impl FakeJob {
    pub fn id(&self) -> &JobId {
        &self.0.id
    }

    /// Write `text` and a newline to `stream` (nothing unless it runs).
    pub fn emit(&self, stream: Stream, text: &str) {
        let mut phase = self.0.phase.lock().unwrap();
        if let Phase::Running(writers) = &mut *phase {
            let w = match stream {
                Stream::Stdout => &mut writers.0,
                Stream::Stderr => &mut writers.1,
            };
            w.write(format!("{text}\n").as_bytes());
        }
    }

    /// The job exits on its own with `code` (nothing if it already ended;
    /// once launched if it is still launching).
    pub fn exit(&self, code: i32) {
        self.0.end(Exit::Code(code));
    }

    /// The job ends as the runner would report `exit` (a crash, an OOM
    /// kill, a lost container); nothing if it already ended.
    pub fn end_with(&self, exit: Exit) {
        self.0.end(exit);
    }

    /// The signals received so far, in order.
    pub fn signals(&self) -> Vec<i32> {
        self.0.signals.borrow().clone()
    }

    /// Wait until the job has received `n` signals in all.
    pub async fn signalled(&self, n: usize) {
        let mut rx = self.0.signals.subscribe();
        let _ = rx.wait_for(|s| s.len() >= n).await;
    }

    /// True once the job has ended (its exit is published).
    pub fn ended(&self) -> bool {
        self.0.exit.borrow().is_some()
    }
}

/// Signals a scripted job.
#[derive(Clone)]
pub struct FakeControl(Arc<JobState>);

impl FakeControl {
    pub fn signal(&self, signal: i32) {
        self.0.receive(signal);
    }

    /// The synchronous last resort (`Drop` paths): ends the job at once.
    pub fn kill_now(&self) {
        self.0.signals.send_modify(|s| s.push(Signal::SIGKILL as i32));
        self.0.end(Exit::Signal(Signal::SIGKILL as i32));
    }
}

impl JobControl for FakeControl {
    fn signal(&self, signal: i32) -> BoxFuture<'_, ()> {
        FakeControl::signal(self, signal);
        Box::pin(async {})
    }

    fn kill_now(&self) {
        FakeControl::kill_now(self)
    }
}

impl Runner for FakeRunner {
    fn launch<'a>(&'a self, job: &'a Launch<'a>) -> BoxFuture<'a, Result<Launched>> {
        Box::pin(FakeRunner::launch(self, job.id, job.spec, job.output))
    }
}
