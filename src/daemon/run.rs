//! `POST /v1/run`: create a foreground job and stream it, in one request.
//!
//! This is the hot path of `berth run` without `-d`: one connection carries
//! the job's record, its output and the outcome (ended, or moved to the
//! background when its budget ran out), where the older routes needed a
//! create, an SSE follow and a foreground long poll. The body is the frame
//! stream of `api/frames.rs`.
//!
//! The output is read from the job's ring or store like any follower, so the
//! job never waits on this stream: a slow terminal only makes it read older
//! lines from the store later.

use std::convert::Infallible;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde::Serialize;

use super::state::{ApiError, AppState};
use crate::api::JobView;
use crate::api::frames::{END, FRAMES_TYPE, HEADER, JOB, RunEnd, STDERR, STDOUT, put_frame};
use crate::manager::{Foreground, Manager};
use crate::model::{JobId, JobSpec, Stream};
use crate::output::{Batch, FollowPage};

/// Bytes per page read for the stream, whatever the number of lines (a
/// page of short lines from the ring is slices of its chunks): a page
/// becomes one or a few frames. Kept under 128 KiB: glibc serves bigger
/// blocks by mmap and, once one is freed, keeps blocks that size in its
/// heaps, which a long-lived daemon then never gives back.
const PAGE_BYTES: usize = 96 * 1024;
/// Frames buffered between the reader task and the connection.
const IN_FLIGHT: usize = 4;

fn json_frame(kind: u8, v: &impl Serialize) -> Bytes {
    let mut buf = BytesMut::new();
    put_frame(&mut buf, kind, &serde_json::to_vec(v).expect("answers serialize"));
    buf.freeze()
}

pub(super) async fn run(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    spec: Result<Json<JobSpec>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(spec) = spec?;
    if spec.background {
        return Err(ApiError::bad_request(
            "POST /v1/run streams a foreground job: send `background: false`, or POST /v1/jobs for a background one".into(),
        ));
    }
    // No `timeout`: the manager gives the job its project's budget.
    let job = s.manager.start_from(spec, super::state::client(&headers)).await?;
    let view = JobView {
        info: s.manager.read_info(&job.id).await?,
        snippet: s.manager.read_snippet(&job.id).await?,
    };
    let rx = stream_job(s.manager.clone(), job.id.clone(), Some(json_frame(JOB, &view)));
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok(([(header::CONTENT_TYPE, FRAMES_TYPE)], body).into_response())
}

/// The frames of foreground job `id` (after `first`, when given): its
/// output from seq 1, then how it ended or that it moved to the background.
/// The route sends them on a connection; `berth run --no-daemon` reads them
/// in its own process, so one driver serves both (`cli/foreground.rs`).
pub(crate) fn stream_job(manager: Manager, id: JobId, first: Option<Bytes>) -> FrameStream {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(IN_FLIGHT);
    tokio::spawn(async move {
        if let Some(first) = first
            && tx.send(Ok(first)).await.is_err()
        {
            return;
        }
        // A closed connection ends the task; the job goes on as any
        // foreground job whose client left (its budget still applies).
        let _ = stream(&manager, &id, &tx).await;
    });
    rx
}

/// What [`stream_job`] gives: encoded frames (`api/frames.rs`).
pub(crate) type FrameStream = tokio::sync::mpsc::Receiver<Result<Bytes, Infallible>>;

/// The connection is gone (or the job vanished): stop streaming.
struct Gone;

/// Send the job's output from seq 1 until it ended and every line is out,
/// or until it left the foreground; then the end frame.
async fn stream(
    manager: &Manager,
    id: &JobId,
    tx: &tokio::sync::mpsc::Sender<Result<Bytes, Infallible>>,
) -> Result<(), Gone> {
    let output = manager.output(id).map_err(|_| Gone)?;
    let page = FollowPage {
        lines: usize::MAX,
        bytes: PAGE_BYTES,
        stream: None,
        // This is the job's foreground: what it has not read stays in memory.
        hold: true,
    };
    let batches = output.follow(1, page);
    tokio::pin!(batches);
    let foreground = manager.await_foreground(id);
    tokio::pin!(foreground);
    let mut outcome = None;
    loop {
        tokio::select! {
            // Lines that are in go out before a move to the background is
            // looked at.
            biased;
            batch = batches.next() => match batch {
                Some(Ok(batch)) => tx.send(Ok(frames(&batch))).await.map_err(|_| Gone)?,
                Some(Err(_)) => return Err(Gone),
                None => break,
            },
            o = &mut foreground, if outcome.is_none() => {
                let promoted = matches!(o, Ok(Foreground::Promoted { .. }));
                outcome = Some(o);
                if promoted {
                    break;
                }
            }
        }
    }
    let outcome = match outcome {
        Some(o) => o,
        None => foreground.await,
    }
    .map_err(|_| Gone)?;
    let end = RunEnd {
        outcome,
        snippet: manager.read_snippet(id).await.unwrap_or_default(),
    };
    tx.send(Ok(json_frame(END, &end))).await.map_err(|_| Gone)
}

/// Output frames for `batch`: one frame per run of a stream, each line
/// followed by `\n`.
fn frames(batch: &Batch) -> Bytes {
    let size = batch.text_bytes();
    let mut buf = BytesMut::with_capacity(size + batch.pieces.len() * HEADER);
    let mut text = Vec::with_capacity(size);
    let _ = batch.runs(&mut text, |stream, text| {
        put_frame(&mut buf, kind(stream), text);
        Ok::<_, Infallible>(())
    });
    buf.freeze()
}

fn kind(stream: Stream) -> u8 {
    match stream {
        Stream::Stderr => STDERR,
        Stream::Stdout => STDOUT,
    }
}
