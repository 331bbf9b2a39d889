//! Writing to stdout without panicking when the reader goes away.
//!
//! `println!` panics on a closed pipe (`berth logs job-1 | head -1`), which
//! prints a backtrace and exits 101. A command-line tool should behave like
//! `cat`: stop writing and exit quietly. Every CLI write goes through
//! [`outln!`]/[`out!`], which turn a write error into [`StdoutClosed`]; the
//! dispatcher maps that error to exit code 141 (128 + SIGPIPE, what a shell
//! reports for a writer killed by a closed pipe) without a message.

use std::fmt;
use std::io::Write;

/// Stdout is gone (the reader closed the pipe, or the terminal went away).
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed")]
pub struct StdoutClosed;

/// The exit code for a CLI whose stdout was closed under it.
pub const CLOSED_STDOUT_EXIT: i32 = 141;

/// Write formatted text to stdout and flush it.
pub fn write(args: fmt::Arguments<'_>) -> Result<(), StdoutClosed> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)
        .and_then(|_| out.flush())
        .map_err(|_| StdoutClosed)
}

/// `println!` that returns `Err(StdoutClosed)` from the enclosing function
/// instead of panicking.
macro_rules! outln {
    () => { $crate::cli::out::write(format_args!("\n"))? };
    ($($arg:tt)*) => { $crate::cli::out::write(format_args!("{}\n", format_args!($($arg)*)))? };
}

/// `print!` that returns `Err(StdoutClosed)` from the enclosing function.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::out::write(format_args!($($arg)*))? };
}

pub(crate) use {out, outln};
