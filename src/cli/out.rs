//! Writing to stdout without panicking when the reader goes away, and a
//! job's lines written as they are or made inert for a terminal.
//!
//! `println!` panics on a closed pipe (`berth logs job-1 | head -1`), which
//! prints a backtrace and exits 101. A command-line tool should behave like
//! `cat`: stop writing and exit quietly. Every CLI write goes through
//! [`outln!`]/[`out!`], which turn a write error into [`StdoutClosed`]; the
//! dispatcher maps that error to exit code 141 (128 + SIGPIPE, what a shell
//! reports for a writer killed by a closed pipe) without a message.
//!
//! A job's output lines go through [`write_lines`]: to a terminal they are
//! shown inert (`crate::inert`: a line cannot set the clipboard or the
//! title, clear the screen or overwrite itself with a CR) unless `--raw`;
//! to a pipe or a file they are the job's own bytes.

use std::fmt;
use std::io::{IsTerminal, Write};

use crate::output::{Line, Stream};

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

/// Where a job's lines are shown inert: each of stdout and stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineMode {
    stdout: bool,
    stderr: bool,
    /// Each line after the time berth read it (`berth logs --timestamps`).
    timestamps: bool,
}

impl LineMode {
    /// Inert on whichever of stdout and stderr is a terminal, unless `raw`.
    pub fn for_terminals(raw: bool) -> Self {
        LineMode {
            stdout: !raw && std::io::stdout().is_terminal(),
            stderr: !raw && std::io::stderr().is_terminal(),
            timestamps: false,
        }
    }

    /// Prefix each line with its time, RFC 3339 in UTC to the millisecond
    /// (`2026-11-25T21:40:00.123Z `), as `docker logs -t` does.
    pub fn with_timestamps(mut self, on: bool) -> Self {
        self.timestamps = on;
        self
    }

    pub fn timestamps(&self) -> bool {
        self.timestamps
    }

    /// Whether lines of `stream` are shown inert.
    fn inert(&self, stream: Stream) -> bool {
        match stream {
            Stream::Stdout => self.stdout,
            Stream::Stderr => self.stderr,
        }
    }
}

/// Write a run of whole lines of `stream` (each ending in `\n`, as a frame
/// carries them) to stdout or stderr, inert where `mode` says. Lines with
/// timestamps need their [`Line`]s: see [`write_lines`].
pub fn write_run(stream: Stream, run: &[u8], mode: LineMode) -> Result<(), StdoutClosed> {
    let text = String::from_utf8_lossy(run);
    if !mode.inert(stream) {
        return emit(stream, &crate::model::exact::bytes(&text));
    }
    let mut buf = Vec::with_capacity(run.len());
    for line in text.split_terminator('\n') {
        push_shown(&mut buf, line, true);
    }
    emit(stream, &buf)
}

/// Write `lines` to stdout (stdout lines) and stderr (stderr lines), one
/// write per run of the same stream, inert where `mode` says.
pub fn write_lines(lines: &[Line], mode: LineMode) -> Result<(), StdoutClosed> {
    let mut buf = Vec::with_capacity(64 * 1024);
    for run in lines.chunk_by(|a, b| a.stream == b.stream) {
        let stream = run[0].stream;
        buf.clear();
        for line in run {
            if mode.timestamps {
                let ts = line.ts.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
                buf.extend_from_slice(ts.as_bytes());
                buf.push(b' ');
            }
            push_shown(&mut buf, &line.text, mode.inert(stream));
        }
        emit(stream, &buf)?;
    }
    Ok(())
}

/// One line as shown, and its `\n`: made inert, or the job's exact bytes.
fn push_shown(buf: &mut Vec<u8>, text: &str, inert: bool) {
    if inert {
        buf.extend_from_slice(crate::inert::visible(text).as_bytes());
    } else {
        buf.extend_from_slice(&crate::model::exact::bytes(text));
    }
    buf.push(b'\n');
}

/// Write shown bytes to the stream's own descriptor. Only a closed stdout
/// matters (the reader is gone: stop); stderr is best effort.
fn emit(stream: Stream, bytes: &[u8]) -> Result<(), StdoutClosed> {
    match stream {
        Stream::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes)
                .and_then(|_| out.flush())
                .map_err(|_| StdoutClosed)
        }
        Stream::Stderr => {
            let _ = std::io::stderr().lock().write_all(bytes);
            Ok(())
        }
    }
}
