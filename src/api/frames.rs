//! The frame stream of `POST /v1/run` (served by `daemon/run.rs`, read by
//! `api/client.rs`): output travels as the job's own bytes (whole lines,
//! each ending in `\n`), so neither side encodes or parses anything per
//! line. A frame is one kind byte, a big-endian u32 payload length, then
//! the payload:
//!
//! - `J` the job as created (`JobInfo` + `snippet`, JSON), always first;
//! - `O` / `E` output lines of stdout / stderr, in seq order across frames;
//! - `F` the end, `{"outcome": {"outcome": "finished"|"promoted", "info"},
//!   "snippet"}`, always last.
//!
//! `POST /v1/jobs/{id}/exec` (`berth exec`) answers with the same framing:
//! `O` / `E` pieces of its output (not necessarily whole lines), then one
//! `X`, its end (`ExecEnd`: `{"exit_code", "timed_out", "note"}`).
//!
//! `GET /v1/jobs/{id}/logs/text` (`berth logs`) sends `O` / `E` runs of
//! whole lines, a `P` before a page that starts past dropped lines or has
//! lost ones (the page's `LogPage`, its `lines` empty), an `N` after each
//! page but the last (the seq to read on from, in decimal: where a reader
//! whose stream broke off resumes), and ends with `F`, the last page's
//! `LogPage` without lines.

use bytes::{Bytes, BytesMut};
use serde::{Deserialize, Serialize};

use crate::manager::Foreground;

/// The media type of the frame stream.
pub const FRAMES_TYPE: &str = "application/vnd.berth.frames";
/// Frame kinds.
pub const JOB: u8 = b'J';
pub const STDOUT: u8 = b'O';
pub const STDERR: u8 = b'E';
pub const END: u8 = b'F';
/// What a page of `logs/text` lacks, before its lines.
pub const PAGE: u8 = b'P';
/// Where the next page of `logs/text` starts, after a page's lines.
pub const NEXT: u8 = b'N';
/// The end of an exec's stream.
pub const EXEC_END: u8 = b'X';
/// Bytes of a frame's header: kind and payload length.
pub const HEADER: usize = 5;

/// The last frame's payload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunEnd {
    pub outcome: Foreground,
    /// The output's tail, for the card of a job moved to the background.
    pub snippet: String,
}

/// Append one frame to `buf`.
pub fn put_frame(buf: &mut BytesMut, kind: u8, payload: &[u8]) {
    buf.reserve(HEADER + payload.len());
    buf.extend_from_slice(&[kind]);
    buf.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    buf.extend_from_slice(payload);
}

/// Take the first whole frame off `buf`, if it holds one.
pub fn take_frame(buf: &mut BytesMut) -> Option<(u8, Bytes)> {
    if buf.len() < HEADER {
        return None;
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if buf.len() < HEADER + len {
        return None;
    }
    let kind = buf[0];
    let _ = buf.split_to(HEADER);
    Some((kind, buf.split_to(len).freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_back_whole_whatever_the_pieces() {
        let mut wire = BytesMut::new();
        put_frame(&mut wire, STDOUT, b"a\nb\n");
        put_frame(&mut wire, STDERR, b"");
        put_frame(&mut wire, END, b"{}");
        let wire = wire.freeze();
        // Fed one byte at a time, as a slow connection might.
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for b in wire.iter() {
            buf.extend_from_slice(&[*b]);
            while let Some((kind, payload)) = take_frame(&mut buf) {
                got.push((kind, payload.to_vec()));
            }
        }
        assert_eq!(
            got,
            vec![
                (STDOUT, b"a\nb\n".to_vec()),
                (STDERR, Vec::new()),
                (END, b"{}".to_vec())
            ]
        );
        assert!(buf.is_empty());
    }
}
