//! Typed errors of the library: one variant per operation that can fail, each
//! carrying the context a user needs to act on it (which job, which path, which
//! pattern, which image). Front ends (CLI, API, MCP) convert these into their own
//! shapes in one place each; [`Error::exit_code`] and [`Error::code`] are the
//! shared vocabulary for that.

use std::path::PathBuf;

use crate::model::JobId;

mod engine;
pub use engine::{EngineFailure, classify as classify_engine_failure};

/// Result alias used across the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the library can refuse or fail at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown job `{0}`: list jobs with `berth ps --all`")]
    UnknownJob(String),

    #[error("unknown layer `{0}`: list layers with `berth layers`")]
    UnknownLayer(String),

    #[error("layer `{layer}` is in use by {jobs}: stop them first (`berth kill ID`), then try again")]
    LayerBusy { layer: String, jobs: String },

    /// An agent's apply that would touch more than its guards allow: the
    /// user's own `berth apply` goes through.
    #[error("{message}; the user can apply it with `berth apply {layer}`")]
    ApplyRefused { layer: String, message: String },

    #[error("invalid regex `{pattern}`: {message}")]
    InvalidRegex { pattern: String, message: String },

    #[error("invalid port `{input}`: {message} (expected e.g. `3000`, `3000/tcp` or `8080:3000`)")]
    InvalidPort { input: String, message: String },

    #[error(
        "host port {port} is in use on this host (asked for port {job_port}): free it, or publish `-p {job_port}` to take a free one"
    )]
    PortInUse { port: u16, job_port: u16 },

    #[error("invalid size `{input}`: expected a number with an optional unit, e.g. `512m`, `2g`, `1048576`")]
    InvalidSize { input: String },

    #[error("invalid {what} `{input}`: {message}")]
    InvalidValue {
        what: &'static str,
        input: String,
        message: String,
    },

    #[error("invalid job spec: {0}")]
    InvalidSpec(String),

    #[error("command not found: `{program}` (is it installed and on PATH?)")]
    CommandNotFound { program: String },

    #[error("cannot run `{program}`: {} is not an executable file (check its mode, or run it through its interpreter)", path.display())]
    NotExecutable { program: String, path: PathBuf },

    #[error("working directory `{}` does not exist or is not a directory", path.display())]
    BadCwd { path: PathBuf },

    #[error("could not start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "job limit reached ({max} running: {running}); stop one with `berth kill ID`, or start with `--queue` to wait for a free slot"
    )]
    CapReached { max: usize, running: String },

    #[error(
        "the queue is full: {max} starts already wait for a slot (max_queued); stop queued jobs with `berth kill ID`, wait for them to start, or raise max_queued"
    )]
    QueueFull { max: usize },

    #[error("job {job} is not running in the foreground (it is {state}); nothing to move to background")]
    NotForeground { job: JobId, state: String },

    #[error(
        "job {job} is still {state}; only a finished job can be resumed (stop it first with `berth kill {job}`)"
    )]
    NotFinished { job: JobId, state: String },

    /// `berth exec` into a job that has no running container to exec in
    /// (queued, ended, a host job): `message` says what to do instead.
    #[error("{job} {message}")]
    NotRunning { job: JobId, message: String },

    #[error("no berth manager is running for instance `{instance}` (socket {}): start one with `berth up`", socket.display())]
    NoDaemon { instance: String, socket: PathBuf },

    #[error("permission denied on berth's socket {} (instance `{instance}`): its manager is another user's; run your own (`berth up` as you, or set BERTH_SOCKET / BERTH_STATE_DIR to yours)", socket.display())]
    SocketDenied { instance: String, socket: PathBuf },

    #[error(
        "a berth daemon for instance `{instance}` is already running (pid {pid}); stop it with `berth down` or use another `--instance`"
    )]
    DaemonRunning { instance: String, pid: String },

    #[error(
        "instance `{instance}` is in use by another berth process (pid {pid}) running a job without a daemon (--no-daemon); wait for it to end, or use another --instance (runs without --no-daemon share one daemon, started on demand)"
    )]
    InstanceBusy { instance: String, pid: String },

    #[error(
        "this program cannot run berth's watchdog: call `berth::embed::helpers()` first in `main` (it re-runs this executable as the watchdog)"
    )]
    NoHelpers,

    #[error("{message}")]
    Remote { code: String, message: String },

    #[error("could not open an MCP session on the berth daemon at {}: {message}", socket.display())]
    McpAttach { socket: PathBuf, message: String },

    #[error("could not {action} `{}`: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("could not listen on {addr} for {what}: {source}")]
    Listen {
        /// What the listener was for: `port 8080/tcp of job-3`, `the egress proxy of job-3`.
        what: String,
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },

    #[error("could not write the network files of job {job} in `{}`: {source}", dir.display())]
    JobFiles {
        job: JobId,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("the job store `{}` failed: {message}", path.display())]
    Store { path: PathBuf, message: String },

    #[error(
        "the job store `{}` cannot be written since {since} ({reason}): new jobs are refused until it can; free space on its disk (running jobs go on, their newest output held in memory)",
        path.display()
    )]
    StoreDegraded {
        path: PathBuf,
        since: String,
        reason: String,
    },

    #[error("could not read config `{}`: {message}", path.display())]
    Config { path: PathBuf, message: String },

    /// An agent's session asked for a job that is not its own.
    #[error("{job} is not yours: {rule}")]
    NotYours { job: String, rule: &'static str },

    /// The project file could not be used (`Config::project_refusal`) or a
    /// job may have written it: no job of that project starts.
    #[error("{why}; until then no job of this project starts (ps, logs, down and config work on)")]
    ProjectFile { why: String },

    #[error(
        "Docker engine not reachable at {endpoint}: {message} (is the engine running? set DOCKER_HOST, or use `--runner host`)"
    )]
    EngineUnavailable { endpoint: String, message: String },

    #[error("image `{image}` is not on the engine: {hint}")]
    ImageMissing { image: String, hint: String },

    #[error("could not pull image `{image}` from {registry}: {reason}; {hint}")]
    PullFailed {
        image: String,
        registry: String,
        reason: String,
        hint: String,
    },

    #[error("cannot build the project image: {path}: {message}")]
    BuildContext { path: PathBuf, message: String },

    #[error(
        "could not build the project image from {dockerfile}: {reason}; fix the Dockerfile (or its build args) and start again"
    )]
    ImageBuildFailed { dockerfile: PathBuf, reason: String },

    #[error(
        "`{program}` is not in image {image}; choose an image with the tool (--image, image in berth.toml) or run with --runner host"
    )]
    NotInImage { program: String, image: String },

    /// berth refused an engine object it does not own, or gave up on one
    /// (a name or network taken by someone else): its own words.
    #[error("Docker engine failed to {action} for job {job}: {message}")]
    Docker {
        action: &'static str,
        job: String,
        message: String,
    },

    /// An engine operation failed (built only by the runner's
    /// `DockerClient`): which one, on what, and the engine's error kept as
    /// the source.
    #[error("Docker engine failed to {op} {target}: {}", engine_words(source))]
    Engine {
        op: EngineOp,
        target: String,
        #[source]
        source: bollard::errors::Error,
    },

    #[error("the manager is shutting down; no new jobs are accepted")]
    ShuttingDown,

    /// Every place for a command check was taken for as long as a check waits.
    #[error(
        "the command filter is busy ({running} checks already running); nothing was started, try again in a moment"
    )]
    FilterBusy { running: usize },

    /// Refused by the command filter. Displays as one line of JSON,
    /// `{"blocked":true,"command":…,"pattern":…,"reason":…}`.
    #[error("{}", blocked_json(reason, pattern, command))]
    Blocked {
        reason: String,
        pattern: String,
        command: String,
    },

    #[error(
        "working directory `{}` is outside the workspace `{}` (after resolving symlinks and `..`); jobs run only inside the workspace",
        path.display(),
        root.display()
    )]
    OutsideWorkspace { path: PathBuf, root: PathBuf },

    /// A project file loosens the sandbox and the user has not trusted it.
    #[error(
        "`{}` sets {key} = {value}, which loosens the sandbox, and this file is not trusted: review it, then run `berth trust` in {} (trust follows the content: after any change, trust it again)",
        file.display(),
        file.parent().map(|d| d.display().to_string()).unwrap_or_default()
    )]
    Untrusted {
        file: PathBuf,
        key: &'static str,
        value: String,
    },

    /// An agent (MCP client) asked for a job looser than the user allows.
    #[error(
        "an agent asked for {key} = {value}, which loosens the sandbox beyond what the user allows; the user can allow it in their own config (~/.config/berth/config.toml: `{switch}`, or {env} where `berth mcp` starts) or a trusted berth.toml"
    )]
    AgentLoosening {
        key: &'static str,
        value: String,
        /// The setting that allows it (`allow_host = true`) and its variable (`BERTH_ALLOW_HOST=1`).
        switch: &'static str,
        env: &'static str,
    },
}

/// The one-line JSON form of a blocked command (what the CLI prints and the API returns).
fn blocked_json(reason: &str, pattern: &str, command: &str) -> String {
    serde_json::json!({"blocked": true, "reason": reason, "command": command, "pattern": pattern}).to_string()
}

impl Error {
    /// A short machine-readable code for API and MCP answers.
    pub fn code(&self) -> &str {
        match self {
            Error::UnknownJob(_) => "unknown_job",
            Error::UnknownLayer(_) => "unknown_layer",
            Error::LayerBusy { .. } => "layer_in_use",
            Error::ApplyRefused { .. } => "apply_refused",
            Error::InvalidRegex { .. } => "invalid_regex",
            Error::InvalidPort { .. } => "invalid_port",
            Error::InvalidSize { .. } => "invalid_size",
            Error::PortInUse { .. } => "port_in_use",
            Error::InvalidValue { .. } => "invalid_value",
            Error::InvalidSpec(_) => "invalid_spec",
            Error::CommandNotFound { .. } => "command_not_found",
            Error::NotExecutable { .. } => "not_executable",
            Error::BadCwd { .. } => "bad_cwd",
            Error::Spawn { .. } => "spawn_failed",
            Error::CapReached { .. } => "cap_reached",
            Error::QueueFull { .. } => "queue_full",
            Error::NotForeground { .. } => "not_foreground",
            Error::NotFinished { .. } => "not_finished",
            Error::NotRunning { .. } => "not_running",
            Error::NoDaemon { .. } => "no_daemon",
            Error::DaemonRunning { .. } => "daemon_running",
            Error::NoHelpers => "no_helpers",
            Error::InstanceBusy { .. } => "instance_busy",
            Error::Remote { code, .. } => code,
            Error::McpAttach { .. } => "mcp_attach",
            Error::Io { .. } | Error::JobFiles { .. } => "io",
            Error::Listen { .. } => "listen_failed",
            Error::Config { .. } => "config",
            Error::ProjectFile { .. } => "project_file",
            Error::NotYours { .. } => "not_yours",
            Error::SocketDenied { .. } => "socket_denied",
            Error::Store { .. } => "store",
            Error::StoreDegraded { .. } => "store_degraded",
            Error::EngineUnavailable { .. } => "engine_unavailable",
            Error::ImageMissing { .. } => "image_missing",
            Error::PullFailed { .. } => "pull_failed",
            Error::BuildContext { .. } => "build_context",
            Error::ImageBuildFailed { .. } => "image_build_failed",
            Error::NotInImage { .. } => "command_not_found",
            Error::Docker { .. } | Error::Engine { .. } => "docker",
            Error::ShuttingDown => "shutting_down",
            Error::FilterBusy { .. } => "filter_busy",
            Error::Blocked { .. } => "blocked",
            Error::OutsideWorkspace { .. } => "outside_workspace",
            Error::Untrusted { .. } | Error::AgentLoosening { .. } => "untrusted_config",
        }
    }

    /// The process exit code a CLI should use for this error (shell conventions:
    /// 127 command not found, 126 cannot execute, 2 usage error, 1 otherwise).
    pub fn exit_code(&self) -> i32 {
        answer_for(self.code()).1
    }

    /// The HTTP status the API answers this error with.
    pub fn http_status(&self) -> u16 {
        answer_for(self.code()).0
    }

    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// An engine operation berth performs; displays as the words of today's
/// messages ("failed to start container …").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineOp {
    Ping,
    InspectImage,
    ListImages,
    PullImage,
    BuildImage,
    RemoveImage,
    CreateContainer,
    StartContainer,
    UpdateContainer,
    WaitContainer,
    KillContainer,
    RemoveContainer,
    InspectContainer,
    ListContainers,
    AttachContainer,
    ContainerLogs,
    ContainerStats,
    Events,
    CreateNetwork,
    InspectNetwork,
    RemoveNetwork,
    ListNetworks,
    ConnectNetwork,
    CreateVolume,
    RemoveVolume,
    ListVolumes,
    UploadArchive,
    DownloadArchive,
    CreateExec,
    StartExec,
    InspectExec,
    Info,
    CreateService,
    InspectService,
    UpdateService,
    RemoveService,
    ListServices,
    ListTasks,
    InspectNode,
    ListNodes,
    ServiceLogs,
    CreateConfig,
    RemoveConfig,
    ListConfigs,
}

impl std::fmt::Display for EngineOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineOp::Ping => "answer",
            EngineOp::InspectImage => "inspect image",
            EngineOp::ListImages => "list",
            EngineOp::PullImage => "pull image",
            EngineOp::BuildImage => "build image",
            EngineOp::RemoveImage => "remove image",
            EngineOp::UploadArchive => "copy files into container",
            EngineOp::DownloadArchive => "copy files out of container",
            EngineOp::CreateExec => "create an exec in container",
            EngineOp::StartExec => "start exec",
            EngineOp::InspectExec => "inspect exec",
            EngineOp::Info => "describe itself",
            EngineOp::CreateContainer => "create container",
            EngineOp::StartContainer => "start container",
            EngineOp::UpdateContainer => "limit container",
            EngineOp::WaitContainer => "wait for container",
            EngineOp::KillContainer => "signal container",
            EngineOp::RemoveContainer => "remove container",
            EngineOp::InspectContainer => "inspect container",
            EngineOp::ListContainers => "list",
            EngineOp::AttachContainer => "attach to container",
            EngineOp::ContainerLogs => "read the logs of container",
            EngineOp::ContainerStats => "read the usage of container",
            EngineOp::Events => "read the engine's events of container",
            EngineOp::CreateNetwork => "create network",
            EngineOp::InspectNetwork => "inspect network",
            EngineOp::RemoveNetwork => "remove network",
            EngineOp::ListNetworks => "list networks",
            EngineOp::ConnectNetwork => "connect a container to network",
            EngineOp::CreateVolume => "create volume",
            EngineOp::RemoveVolume => "remove volume",
            EngineOp::ListVolumes => "list volumes",
            EngineOp::CreateService => "create service",
            EngineOp::InspectService => "inspect service",
            EngineOp::UpdateService => "update service",
            EngineOp::RemoveService => "remove service",
            EngineOp::ListServices => "list services",
            EngineOp::ListTasks => "list the tasks of service",
            EngineOp::InspectNode => "inspect node",
            EngineOp::ListNodes => "list",
            EngineOp::ServiceLogs => "read the logs of service",
            EngineOp::CreateConfig => "create config",
            EngineOp::RemoveConfig => "remove config",
            EngineOp::ListConfigs => "list configs",
        })
    }
}

impl Error {
    /// The engine's HTTP status, when an engine operation was answered with
    /// an error (404: no such object, 409: conflict …).
    pub fn engine_status(&self) -> Option<u16> {
        match self {
            Error::Engine {
                source: bollard::errors::Error::DockerResponseServerError { status_code, .. },
                ..
            } => Some(*status_code),
            _ => None,
        }
    }

    /// What an engine failure means (`engine.rs`); `Other` for every
    /// other error.
    pub fn engine_failure(&self) -> EngineFailure {
        match self {
            Error::Engine { .. } => engine::classify(self.engine_status(), &self.engine_reason()),
            _ => EngineFailure::Other,
        }
    }

    /// The engine's own words for an engine failure (the whole message for
    /// any other error): for messages that say what failed in their own way.
    pub fn engine_reason(&self) -> String {
        match self {
            Error::Engine { source, .. } => engine_words(source),
            other => other.to_string(),
        }
    }
}

/// What the engine said, without bollard's wrapping (a server error's own
/// message; any other error as it displays).
pub fn engine_words(e: &bollard::errors::Error) -> String {
    match e {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        // The builder's own words, sent inside a build stream.
        bollard::errors::Error::DockerStreamError { error } => error.clone(),
        other => other.to_string(),
    }
}

/// The one table of how an error is answered: (HTTP status, CLI exit code)
/// by its code, so that an error that came back from a daemon (as its code
/// only) exits the CLI as the same error raised here would.
fn answer_for(code: &str) -> (u16, i32) {
    match code {
        "unknown_job" | "unknown_layer" => (404, 1),
        "layer_in_use" => (409, 1),
        "apply_refused" | "not_yours" | "socket_denied" => (403, 1),
        "invalid_regex" | "invalid_port" | "invalid_size" | "invalid_value" | "invalid_spec" | "bad_cwd"
        | "outside_workspace" | "bad_request" => (400, 2),
        // A caller's project file (or BERTH_CONFIG) that cannot be read is
        // the caller's to fix.
        "config" | "project_file" => (400, 2),
        "command_not_found" => (400, 127),
        "not_executable" => (400, 126),
        "spawn_failed" => (500, 126),
        "blocked" | "untrusted_config" => (403, 126),
        "cap_reached" | "queue_full" | "port_in_use" | "not_foreground" | "not_finished" | "not_running" => {
            (409, 1)
        }
        "shutting_down" | "engine_unavailable" | "filter_busy" | "store_degraded" => (503, 1),
        "image_missing" | "image_build_failed" | "build_context" => (422, 1),
        "docker" | "pull_failed" => (502, 1),
        _ => (500, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that came back from a daemon as its code answers as the
    /// same error raised here: one table for exit codes and HTTP statuses.
    #[test]
    fn remote_errors_answer_as_local_ones() {
        let local = [
            Error::Blocked {
                command: "rm -rf /".into(),
                pattern: "r".into(),
                reason: "no".into(),
            },
            Error::UnknownJob("job-9".into()),
            Error::InvalidSize { input: "x".into() },
            Error::CapReached {
                max: 3,
                running: "job-1".into(),
            },
            Error::ShuttingDown,
            Error::FilterBusy { running: 4 },
        ];
        for e in local {
            let remote = Error::Remote {
                code: e.code().into(),
                message: e.to_string(),
            };
            assert_eq!(
                (remote.exit_code(), remote.http_status()),
                (e.exit_code(), e.http_status()),
                "{e}"
            );
        }
        assert_eq!(Error::UnknownJob("x".into()).http_status(), 404);
        assert_eq!(Error::InvalidSpec("x".into()).exit_code(), 2);
    }

    /// An engine failure keeps the engine's error as its source and says
    /// the engine's own words, unwrapped.
    #[test]
    fn engine_errors_keep_their_source() {
        let e = Error::Engine {
            op: EngineOp::StartContainer,
            target: "berth-t-0123-job-3".into(),
            source: bollard::errors::Error::DockerResponseServerError {
                status_code: 500,
                message: "driver failed programming external connectivity".into(),
            },
        };
        assert_eq!(
            e.to_string(),
            "Docker engine failed to start container berth-t-0123-job-3: driver failed programming external connectivity"
        );
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!((e.code(), e.http_status()), ("docker", 502));
    }
}
