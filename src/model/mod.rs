//! The plain data of berth: what a job is asked to do, where it is in its
//! life, its output lines and its events. Every type here can be saved, sent
//! and compared; none holds a live handle (a process, a container stream, a
//! lock), and this module depends on nothing else in the crate, so every
//! other module can use it and the store can persist it without knowing the
//! modules that produce it. Behaviour that can fail with the crate's errors
//! (parsing, validation) lives beside the behaviour it belongs to (`job.rs`,
//! `ready.rs`, `images/`).

mod child;
mod chunk;
mod event;
pub mod exact;
mod image;
mod layer;
mod line;
mod net;
mod outcome;
mod ready;
mod request;
mod spec;
mod status;
mod words;

pub use child::{ChildInfo, ChildLogs, ChildPort, ChildState};
pub(crate) use chunk::after_newlines;
pub use chunk::{Chunk, LineBuf};
pub use event::{Event, EventKind};
pub use image::{
    BuildProgress, BuildTable, ImageChoice, ImageValue, PostCreate, ProjectBuild, PullPolicy, PullProgress,
};
pub use layer::{Applied, Change, ChangeKind, EntryKind, LayerCounts, LayerInfo, LayerState, Writes};
pub use line::{Gap, Line, LogPage, LogQuery, Stream};
pub use net::{Egress, EngineAccess, Isolation, Publish, WriteMode};
pub use outcome::Outcome;
pub use ready::{HttpCheck, ReadyAsk, ReadyCondition};
pub use request::RunRequest;
pub use spec::{
    AppliedLimits, JobId, Limits, MAX_PIDS, MIN_MEMORY, Network, OnTimeout, PortMapping, PortSpec, Proto,
    RunnerChoice, RunnerKind, host_cpus,
};
pub use spec::{JobSpec, MountSpec};
pub use status::{CauseKind, EndedBy, JobInfo, JobStatus, LogPaths, NodeLoad, StartMode, StopCause, Usage};
pub use words::{clock, elapsed, end_words};

/// The project's config files at the workspace root: a container job may
/// read them but not change them (berth mounts them read-only).
pub const PROTECTED_FILES: [&str; 4] = ["berth.toml", ".devcontainer.json", ".devcontainer", ".berth"];
