//! berth inside another program (a test harness, an agent runtime): the two
//! helper processes the `berth` binary provides — the host-job shim and the
//! crash watchdog — served by the embedding program's own executable.
//!
//! Why: a host job's leader is berth's shim (a child subreaper, so nothing a
//! job starts escapes it), and a manager's crash is cleaned up by a watchdog
//! process that outlives it. Both are started by re-running an executable
//! with a subcommand. In the `berth` binary that is the binary itself; an
//! embedder calls [`helpers`] first thing in `main`, which runs the helper
//! when the process was started as one (and exits), and otherwise marks
//! this executable as the one to re-run. [`guard`] then claims the
//! manager's instance and starts its watchdog:
//!
//! ```no_run
//! fn main() -> berth::Result<()> {
//!     berth::embed::helpers(); // first: this binary is also the shim and the watchdog
//!     let runtime = tokio::runtime::Runtime::new().expect("runtime");
//!     runtime.block_on(async {
//!         let manager = berth::Manager::open(berth::Config::isolated("/tmp/my-tool", "my-tool")).await?;
//!         let guard = berth::embed::guard(&manager)?; // a crash of this process stops every job
//!         // … start jobs …
//!         manager.shutdown().await;
//!         drop(guard); // a clean end: the watchdog stands down
//!         Ok(())
//!     })
//! }
//! ```
//!
//! `examples/embed.rs` is such a program; the suite kills it with SIGKILL
//! and checks that its jobs do not outlive it.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::claim::Claim;
use crate::config::Config;
use crate::error::Result;
use crate::manager::Manager;

/// Run berth's helper this process was started as (the host-job shim or the
/// crash watchdog) and exit; otherwise return, this executable now serving
/// them. Call it first in `main`, before any thread or runtime starts.
pub fn helpers() {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(a) if a == crate::runner::shim::SUBCOMMAND => crate::runner::shim::main(args.collect()),
        Some(a) if a == crate::watchdog::SUBCOMMAND => std::process::exit(watchdog(args.collect())),
        _ => crate::runner::shim::serve_from_this_executable(),
    }
}

/// `watchdog --owner PID:START [--log-file PATH]`, the instance from the
/// `BERTH_*` variables its manager set ([`crate::watchdog::spawn_berth`]).
fn watchdog(args: Vec<OsString>) -> i32 {
    let mut owner = None;
    let mut log_file = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--owner") => owner = args.next().and_then(|o| o.into_string().ok()),
            Some("--log-file") => log_file = args.next().map(PathBuf::from),
            _ => {
                eprintln!(
                    "berth watchdog: unexpected argument '{}' (internal: started by a manager as `watchdog --owner PID:START`)",
                    arg.to_string_lossy()
                );
                return 2;
            }
        }
    }
    let Some(owner) = owner else {
        eprintln!("berth watchdog: --owner PID:START is required");
        return 2;
    };
    crate::logfile::init_tracing(log_file.as_deref());
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let config = match Config::load(&cwd, Default::default()) {
        Ok(c) => c,
        Err(e) => {
            crate::logfile::say(&format!("berth watchdog: {e}"));
            return 1;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            crate::logfile::say(&format!("berth watchdog: could not start the async runtime: {e}"));
            return 1;
        }
    };
    match runtime.block_on(crate::watchdog::run(config, owner)) {
        Ok(()) => 0,
        Err(e) => {
            crate::logfile::say(&format!("berth watchdog: {e}"));
            1
        }
    }
}

/// An embedded manager's claim on its instance, with its crash watchdog
/// running. Dropping it after [`Manager::shutdown`] is a clean end (the
/// watchdog stands down); the process dying while it is held is a crash
/// (the watchdog stops the jobs, removes the containers, marks the runs lost).
pub struct Guard {
    _claim: Claim,
    watchdog: u32,
}

impl Guard {
    /// The watchdog's pid.
    pub fn watchdog_pid(&self) -> u32 {
        self.watchdog
    }
}

/// Claim `manager`'s instance for this process (one manager per instance;
/// refused while another holds it) and start its crash watchdog, which
/// re-runs this executable: call [`helpers`] first in `main`.
pub fn guard(manager: &Manager) -> Result<Guard> {
    if !crate::runner::shim::served_from_this_executable() {
        return Err(crate::error::Error::NoHelpers);
    }
    let claim = Claim::take(manager.config())?;
    claim.publish()?;
    let watchdog = crate::watchdog::spawn(manager.config())?;
    Ok(Guard {
        _claim: claim,
        watchdog,
    })
}
