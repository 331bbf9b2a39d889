//! Shell completion with job ids. `berth completions SHELL` prints a short
//! script that makes the shell ask berth itself on TAB (`COMPLETE=SHELL
//! berth -- WORDS…`, clap_complete's protocol); [`answer_if_asked`] answers
//! such a request from the argument definitions, and the verbs that take a
//! job id (`status`, `logs`, `wait`, `kill`, `resume`, `bg`, `exec`, and
//! `cp`'s `JOB:PATH`) offer the instance's jobs, each with its label and
//! status as help.
//!
//! Completion runs on every TAB, so it must be quick and quiet: the jobs
//! come from the instance's daemon when one answers within
//! [`ASK_LIMIT`], else from its store opened read-only (history after
//! `berth down`). It never starts a daemon or a manager, never writes, and
//! never prints: any failure just means no ids are offered.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::Duration;

use clap::CommandFactory;
use clap_complete::env::Shells;
use clap_complete::{ArgValueCandidates, ArgValueCompleter, CompleteEnv, CompletionCandidate};

use super::{Cli, Global};
use crate::api::client::Client;
use crate::model::JobInfo;
use crate::store::Store;

/// How long a TAB waits for a daemon before reading the store instead.
const ASK_LIMIT: Duration = Duration::from_millis(500);

/// At most this many finished jobs are read from the store (newest first).
const STORE_JOBS: usize = 200;

/// The environment variable naming the shell that asks for completions.
const VAR: &str = "COMPLETE";

/// When the shell asks for completions, answer and exit; otherwise return.
pub fn answer_if_asked() {
    // Whatever goes wrong while answering, the shell's line stays clean:
    // a panic's message would land in the middle of what is being typed.
    if std::env::var_os(VAR).is_some_and(|v| !v.is_empty() && v != "0") {
        std::panic::set_hook(Box::new(|_| {}));
    }
    CompleteEnv::with_factory(Cli::command).var(VAR).complete();
}

/// The script registering berth as its own completer in `shell`.
pub fn registration(shell: clap_complete::Shell) -> anyhow::Result<String> {
    let name = shell.to_string();
    let shells = Shells::builtins();
    let Some(completer) = shells.completer(&name) else {
        anyhow::bail!("no dynamic completion for `{name}`: use bash, zsh, fish, elvish or powershell");
    };
    let mut buf = Vec::new();
    completer.write_registration(VAR, "berth", "berth", &program(), &mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// How the script calls berth back: as it was called (`berth` is found on
/// `PATH` at every TAB; a path with a directory is made absolute, since
/// the shell may be elsewhere later). The same rule as clap_complete's own.
fn program() -> String {
    let arg0 = PathBuf::from(std::env::args_os().next().unwrap_or_else(|| "berth".into()));
    let path = match (arg0.components().count() > 1, std::env::current_dir()) {
        (true, Ok(cwd)) => cwd.join(arg0),
        _ => arg0,
    };
    path.to_string_lossy().into_owned()
}

/// Candidates for an argument that is a job id.
pub fn job_ids() -> ArgValueCandidates {
    ArgValueCandidates::new(|| {
        jobs()
            .iter()
            .map(|j| candidate(j.id.to_string(), j))
            .collect::<Vec<_>>()
    })
}

/// Candidates for `cp`'s `JOB:PATH`: `job-3:` while the job is being typed
/// (the path inside a container is not known here).
pub fn job_paths() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| {
        let current = current.to_string_lossy();
        if current.contains(':') {
            return Vec::new();
        }
        jobs()
            .iter()
            .map(|j| candidate(format!("{}:", j.id), j))
            .filter(|c| c.get_value().to_string_lossy().starts_with(current.as_ref()))
            .collect()
    })
}

/// One candidate: the value, and the job's label and status as its help
/// (one line, inert: shells show it beside the id, fish splits on a tab).
fn candidate(value: String, job: &JobInfo) -> CompletionCandidate {
    let what = if job.label.is_empty() {
        &job.command
    } else {
        &job.label
    };
    let mut what: String = crate::inert::visible(what).replace('\t', " ");
    if what.chars().count() > 48 {
        what = what.chars().take(47).collect::<String>() + "…";
    }
    let help = format!("{what} ({})", job.status.name());
    CompletionCandidate::new(value).help(Some(help.into()))
}

/// The instance's jobs, newest first: the daemon's when it answers in
/// time, else the store's; none on any failure (a panic included).
fn jobs() -> Vec<JobInfo> {
    std::panic::catch_unwind(read_jobs).unwrap_or_default()
}

fn read_jobs() -> Vec<JobInfo> {
    let Ok(config) = global_from_words().config() else {
        return Vec::new();
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return Vec::new();
    };
    // One limit for the whole question (connecting and listing).
    // (The timer is made inside the runtime: it needs its clock.)
    let asked = runtime.block_on(async {
        let ask = async { Client::connect(&config).await.ok()?.panel_jobs().await.ok() };
        tokio::time::timeout(ASK_LIMIT, ask).await.ok().flatten()
    });
    if let Some(jobs) = asked {
        return jobs;
    }
    let db = config.instance_dir().join("berth.db");
    if !db.is_file() {
        return Vec::new();
    }
    let Ok(runs) = Store::open_read_only(&db).and_then(|s| s.runs()) else {
        return Vec::new();
    };
    let jobs = runs.into_iter().map(|r| r.info).collect();
    crate::manager::newest_first(jobs, None, STORE_JOBS)
}

/// The instance flags typed on the line being completed (`--instance`,
/// `--state-dir`, `--workspace`), so ids come from the instance the
/// command will talk to. The words follow the `--` of the shell's call;
/// a job's own argv (after a second `--`) is not looked at.
fn global_from_words() -> Global {
    let words: Vec<String> = std::env::args_os()
        .skip_while(|a| a != "--")
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .take_while(|a| a != "--")
        .collect();
    let mut global = Global::default();
    // The first word is the program.
    let mut words = words.iter().skip(1);
    while let Some(w) = words.next() {
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (w.as_str(), None),
        };
        if !matches!(flag, "--instance" | "--state-dir" | "--workspace") {
            continue;
        }
        let Some(value) = inline.or_else(|| words.next().cloned()) else {
            break;
        };
        match flag {
            "--instance" => global.instance = Some(value),
            "--state-dir" => global.state_dir = Some(value.into()),
            _ => global.workspace = Some(value.into()),
        }
    }
    global
}
