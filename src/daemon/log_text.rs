//! `GET /v1/jobs/{id}/logs/text`: a job's output from `since` as the job's
//! own text, in the frame stream of `api/frames.rs`, read page after page
//! until `limit` lines or the last line there was when the read began
//! (what `berth logs` prints).
//!
//! The JSON route answers a page of line objects; with short lines the
//! objects (a seq, a stream and a timestamp per line, encoded here and
//! parsed by the client) cost ten times the text. Here lines travel as
//! runs of text: `O` / `E` frames of whole lines, each ending in `\n`. A
//! page that starts after lines the output cap dropped, or that has lost
//! lines in its range, is preceded by a `P` frame (the page's `LogPage`
//! without its lines), so the reader says so where it happens; the stream
//! ends with `F`, the last page's `LogPage` without lines (where to read
//! on). An `N` after each other page says where the next one starts, so a
//! stream without `F` (it broke off) says where to read on.

use std::convert::Infallible;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};

use super::state::{ApiError, AppState};
use crate::api::frames::{END, FRAMES_TYPE, NEXT, PAGE, STDERR, STDOUT, put_frame};
use crate::manager::Manager;
use crate::model::{JobId, Line, LogPage, LogQuery, Stream};
use crate::output::PAGE_LINES;

/// Pages read ahead of the connection.
const IN_FLIGHT: usize = 2;

pub(super) async fn logs_text(
    State(s): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<LogQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(mut q) = q?;
    if q.tail.is_some() {
        return Err(ApiError::bad_request(
            "logs/text reads from `since` on: drop `tail`, or ask GET /v1/jobs/{id}/logs for a tail".into(),
        ));
    }
    let id = JobId::from(id.as_str());
    q.since = Some(q.since.unwrap_or(1).max(1));
    // The first page before the answer: an unknown job is an error status,
    // not a stream that breaks off.
    let first = s.manager.read_logs(&id, &page_query(&q, q.limit)).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(IN_FLIGHT);
    let manager = s.manager.clone();
    tokio::spawn(async move { send_pages(&manager, &id, q, first, &tx).await });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok(([(header::CONTENT_TYPE, FRAMES_TYPE)], body).into_response())
}

fn page_query(q: &LogQuery, left: Option<usize>) -> LogQuery {
    LogQuery {
        since: q.since,
        limit: left.map(|l| l.clamp(1, PAGE_LINES)),
        stream: q.stream,
        tail: None,
    }
}

/// Send `page` and the pages after it until `q.limit` lines were sent or
/// the last line there was at the start; then the end frame. Returns when
/// done, when the connection is gone, or (without an end frame) when a
/// read fails.
async fn send_pages(
    manager: &Manager,
    id: &JobId,
    mut q: LogQuery,
    mut page: LogPage,
    tx: &tokio::sync::mpsc::Sender<Result<Bytes, Infallible>>,
) {
    let (end, mut left) = (page.last_seq, q.limit);
    loop {
        let lines = std::mem::take(&mut page.lines);
        if let Some(l) = &mut left {
            *l = l.saturating_sub(lines.len());
        }
        let mut buf = BytesMut::new();
        if page.truncated_before.is_some() || !page.lost.is_empty() {
            put_frame(
                &mut buf,
                PAGE,
                &serde_json::to_vec(&page).expect("pages serialize"),
            );
        }
        put_runs(&mut buf, &lines);
        drop(lines);
        q.since = Some(page.next_seq);
        let done = !page.has_more || left == Some(0) || page.next_seq > end;
        if done {
            put_frame(
                &mut buf,
                END,
                &serde_json::to_vec(&page).expect("pages serialize"),
            );
        } else {
            put_frame(&mut buf, NEXT, page.next_seq.to_string().as_bytes());
        }
        if tx.send(Ok(buf.freeze())).await.is_err() || done {
            return;
        }
        page = match manager.read_logs(id, &page_query(&q, left)).await {
            Ok(page) => page,
            Err(e) => {
                tracing::warn!(job = %id, error = %e, "a log read failed mid-stream: the stream breaks off");
                return;
            }
        };
    }
}

/// One frame per run of lines of one stream: their text, each line
/// followed by `\n`.
fn put_runs(buf: &mut BytesMut, lines: &[Line]) {
    let mut text = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        text.extend_from_slice(line.text.as_bytes());
        text.push(b'\n');
        if lines.get(i + 1).is_none_or(|next| next.stream != line.stream) {
            let kind = match line.stream {
                Stream::Stdout => STDOUT,
                Stream::Stderr => STDERR,
            };
            put_frame(buf, kind, &text);
            text.clear();
        }
    }
}
