//! `POST /v1/jobs/{id}/exec`: a command run inside a running container job
//! (`berth exec`), answered as the frame stream of `api/frames.rs`: `O` /
//! `E` frames carry its stdout / stderr as the engine sent them (pieces of
//! at most 32 KiB, not necessarily whole lines), then one `X` frame, the
//! end (`ExecEnd` as JSON). A refusal (unknown or not running job, host
//! job, blocked command) is an ordinary JSON error before any frame.
//!
//! A few frames are in flight at a time: a client that reads slowly slows
//! the command; one that goes away kills it (`manager/exec.rs`).

use std::convert::Infallible;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;

use super::state::{ApiError, AppState};
use crate::api::frames::{EXEC_END, FRAMES_TYPE, STDERR, STDOUT, put_frame};
use crate::manager::{ExecEvent, ExecRequest};
use crate::model::{JobId, Stream};

pub async fn exec(
    State(s): State<AppState>,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
    req: Result<Json<ExecRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = req?;
    let id = JobId::from(id.as_str());
    let rx = s.manager.exec(&id, req, super::state::client(&headers)).await?;
    let frames = tokio_stream::wrappers::ReceiverStream::new(rx).map(|event| {
        let mut buf = BytesMut::new();
        match event {
            ExecEvent::Output(Stream::Stdout, bytes) => put_frame(&mut buf, STDOUT, &bytes),
            ExecEvent::Output(Stream::Stderr, bytes) => put_frame(&mut buf, STDERR, &bytes),
            ExecEvent::End(end) => put_frame(
                &mut buf,
                EXEC_END,
                &serde_json::to_vec(&end).expect("answers serialize"),
            ),
        }
        Ok::<Bytes, Infallible>(buf.freeze())
    });
    Ok(([(header::CONTENT_TYPE, FRAMES_TYPE)], Body::from_stream(frames)).into_response())
}
