//! The API server: axum routes over a [`Manager`], served on a Unix socket.
//!
//! Every handler turns library errors into `{"error": {"code", "message"}}`
//! with a fitting HTTP status in one place ([`ApiError`]); malformed bodies,
//! unknown fields and bad query strings are caught by the extractors and
//! answered the same way, so no request can take the daemon down.
//! `serve` takes its shutdown as a future (mini-redis style); a
//! `POST /v1/shutdown` cancels the daemon's root token instead.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::{Stream, StreamExt, stream};
use serde::Deserialize;

use crate::api::{
    BackgroundRequest, CreatedReady, EventsPage, Health, JobView, MAX_BODY_BYTES, MORE_BEFORE_HEADER,
    WaitForPortRequest, WaitRequest,
};
use crate::config::DEFAULT_WAIT_SECS;
use crate::error::Error;
use crate::manager::{KillRequest, ListFilter, MAX_PAGE_ITEMS, Manager};
use crate::model::{EndedBy, JobId, JobSpec};
use crate::output::{FollowPage, LogQuery, Stream as OutStream};

pub use super::state::{ApiError, AppState};

type ApiResult<T> = Result<Json<T>, ApiError>;

/// The routes (see `API.md`).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/jobs", post(create).get(list))
        .route("/v1/run", post(super::run::run))
        .route("/v1/nodes", get(nodes))
        .route("/v1/jobs/{id}", get(info))
        .route("/v1/jobs/{id}/logs", get(logs))
        .route("/v1/jobs/{id}/logs/follow", get(follow_logs))
        .route("/v1/jobs/{id}/logs/text", get(super::log_text::logs_text))
        .route("/v1/jobs/{id}/children/{name}/logs", get(child_logs))
        .route("/v1/jobs/{id}/archive", get(super::files::archive))
        .route("/v1/jobs/{id}/exec", post(super::exec::exec))
        .route("/v1/jobs/{id}/wait", post(wait))
        .route("/v1/jobs/{id}/foreground", get(foreground))
        .route("/v1/jobs/{id}/kill", post(kill))
        .route("/v1/jobs/{id}/resume", post(resume))
        .route("/v1/jobs/{id}/background", post(background))
        .route("/v1/layers", get(super::layers::list))
        .route(
            "/v1/layers/{layer}",
            get(super::layers::info).delete(super::layers::discard),
        )
        .route("/v1/layers/{layer}/diff", post(super::layers::diff))
        .route("/v1/layers/{layer}/apply", post(super::layers::apply))
        .route("/v1/events", get(events))
        .route("/v1/events/follow", get(follow_events))
        .route("/v1/wait_for_port", post(wait_for_port))
        .route("/v1/prune", post(prune))
        .route("/v1/mcp", post(super::attach::attach))
        .route("/v1/shutdown", post(shutdown))
        .fallback(|| async {
            ApiError {
                status: StatusCode::NOT_FOUND,
                code: "not_found".into(),
                message: "no such route: see API.md for the routes".into(),
            }
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn health(State(s): State<AppState>) -> Json<Health> {
    let store = s.manager.store();
    let trouble = match store.health() {
        crate::store::StoreHealth::Ok => None,
        crate::store::StoreHealth::Degraded { since, reason } => Some(crate::api::StoreTrouble {
            since,
            reason,
            held_bytes: store.held_bytes(),
        }),
    };
    Json(Health {
        ok: true,
        status: match (s.manager.is_shutting_down(), trouble.is_some()) {
            (true, _) => "stopping",
            (false, true) => "degraded",
            (false, false) => "ok",
        }
        .into(),
        store: trouble,
        notice: store.notice(),
        pid: std::process::id(),
        instance: s.manager.config().instance.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
    })
}

fn body<T>(b: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    b.map(|Json(t)| t).map_err(ApiError::from)
}

/// A job's record and snippet, read off the async workers when they come
/// from the store.
async fn view(m: &Manager, id: &JobId) -> Result<JobView, ApiError> {
    Ok(JobView {
        info: m.read_info(id).await?,
        snippet: m.read_snippet(id).await?,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateQuery {
    /// Wait up to this many seconds for the spec's ready conditions before
    /// answering (`{job, ready}` instead of the job alone): `berth run -d
    /// --ready-…` in one round trip.
    #[serde(default)]
    ready_timeout: Option<f64>,
}

async fn create(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    q: Result<Query<CreateQuery>, QueryRejection>,
    spec: Result<Json<JobSpec>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = q?;
    let spec = body(spec)?;
    let wait = q.ready_timeout.map(|t| secs("ready_timeout", t)).transpose()?;
    // A foreground job without a budget gets its project's from the manager
    // (promoted when it runs out, never lost).
    let conditions = spec.ready.clone();
    let job = s.manager.start_from(spec, super::state::client(&headers)).await?;
    let Some(timeout) = wait else {
        return Ok(Json(view(&s.manager, &job.id).await?).into_response());
    };
    let ready = s.manager.wait(&job.id, &conditions, timeout).await?;
    let job = view(&s.manager, &job.id).await?;
    Ok(Json(CreatedReady { job, ready }).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    #[serde(default)]
    filter: Option<ListFilter>,
    /// Sample CPU/memory of running jobs (costs about a second per container).
    #[serde(default)]
    usage: bool,
    /// Most jobs in the answer (newest first; default 50).
    #[serde(default)]
    limit: Option<usize>,
    /// Only jobs older than this one (the last id of the previous page).
    #[serde(default)]
    before: Option<String>,
}

/// A page of jobs (by count and bytes); `berth-more-before: ID` when older
/// ones remain.
async fn list(
    State(s): State<AppState>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = q?;
    let filter = q.filter.unwrap_or_default();
    let before = q.before.as_deref().map(JobId::from);
    let limit = q.limit.unwrap_or(crate::manager::DEFAULT_LIST_LIMIT);
    // Finished jobs beyond the registry are read from the store: off the workers.
    let mut page = s
        .manager
        .off_worker(move |m| m.list_page(filter, before.as_ref(), limit))
        .await;
    if q.usage {
        s.manager.fill_usage(&mut page.jobs).await;
    }
    let mut answer = Json(page.jobs).into_response();
    if let Some(more) = page.more.and_then(|id| id.as_str().parse().ok()) {
        answer.headers_mut().insert(MORE_BEFORE_HEADER, more);
    }
    Ok(answer)
}

/// The nodes the running jobs are spread over (a swarm's), with what
/// berth's jobs reserve on each.
async fn nodes(State(s): State<AppState>) -> ApiResult<Vec<crate::model::NodeLoad>> {
    Ok(Json(s.manager.nodes().await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InfoQuery {
    #[serde(default)]
    usage: bool,
}

async fn info(
    State(s): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<InfoQuery>, QueryRejection>,
) -> ApiResult<JobView> {
    let Query(q) = q?;
    let id = JobId::from(id.as_str());
    let mut v = view(&s.manager, &id).await?;
    if q.usage {
        v.info = s.manager.info_with_usage(&id).await?;
    }
    Ok(Json(v))
}

async fn logs(
    State(s): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<LogQuery>, QueryRejection>,
) -> ApiResult<crate::output::LogPage> {
    let Query(q) = q?;
    Ok(Json(s.manager.read_logs(&JobId::from(id.as_str()), &q).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChildLogsQuery {
    #[serde(default)]
    tail: Option<usize>,
}

/// The output of a child a job started through its scoped engine.
async fn child_logs(
    State(s): State<AppState>,
    Path((id, name)): Path<(String, String)>,
    q: Result<Query<ChildLogsQuery>, QueryRejection>,
) -> ApiResult<crate::model::ChildLogs> {
    let Query(q) = q?;
    let id = JobId::from(id.as_str());
    let lines = s.manager.child_logs(&id, &name, q.tail)?;
    Ok(Json(crate::model::ChildLogs {
        job: id,
        child: name,
        lines,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FollowQuery {
    #[serde(default)]
    since: Option<u64>,
    #[serde(default)]
    stream: Option<OutStream>,
    /// Send `lines` events (a JSON array of lines each) instead of one
    /// `line` event per line: what a client that keeps up with a fast job uses.
    #[serde(default)]
    batch: bool,
}

/// Lines per page read for a follower; a batch is one page.
const FOLLOW_PAGE: usize = 4096;

/// SSE: `line` events (one [`crate::output::Line`] each; with `batch=true`,
/// `lines` events carrying up to a page of them as an array), then one `end`
/// event once the job has ended and every line was sent.
async fn follow_logs(
    State(s): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<FollowQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let Query(q) = q?;
    let id = JobId::from(id.as_str());
    let output = s.manager.output(&id)?;
    let page = FollowPage {
        lines: FOLLOW_PAGE,
        bytes: crate::output::PAGE_BYTES,
        stream: q.stream,
        hold: false,
    };
    let batches = Box::pin(output.follow(q.since.unwrap_or(1), page));
    let manager = s.manager.clone();
    let events = stream::unfold(Some(batches), move |batches| {
        let manager = manager.clone();
        let id = id.clone();
        async move {
            let mut batches = batches?;
            match batches.next().await {
                Some(Ok(batch)) => {
                    // Lines lost before the batch are said first, as `lost`.
                    let mut events: Vec<_> = (!batch.lost.is_empty())
                        .then(|| {
                            Ok(SseEvent::default()
                                .event("lost")
                                .json_data(&batch.lost)
                                .expect("gaps serialize"))
                        })
                        .into_iter()
                        .collect();
                    if q.batch {
                        let lines: Vec<_> = batch.lines().collect();
                        events.push(Ok(SseEvent::default()
                            .event("lines")
                            .json_data(&lines)
                            .expect("lines serialize")));
                    } else {
                        events.extend(batch.lines().map(|l| {
                            Ok(SseEvent::default()
                                .event("line")
                                .json_data(&l)
                                .expect("lines serialize"))
                        }));
                    }
                    Some((events, Some(batches)))
                }
                // An unreadable store ends the stream without `end`.
                Some(Err(_)) => None,
                None => {
                    // All output is in; the record may lag a moment behind
                    // the pipes closing: `end` carries the final status.
                    let info = manager.wait_end(&id).await.ok();
                    let end = SseEvent::default()
                        .event("end")
                        .json_data(&info)
                        .expect("info serializes");
                    Some((vec![Ok(end)], None))
                }
            }
        }
    })
    .flat_map(stream::iter);
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

async fn wait(
    State(s): State<AppState>,
    Path(id): Path<String>,
    req: Result<Json<WaitRequest>, JsonRejection>,
) -> ApiResult<crate::ready::WaitOutcome> {
    let req = body(req)?;
    let timeout = secs("timeout", req.timeout.unwrap_or(DEFAULT_WAIT_SECS))?;
    Ok(Json(
        s.manager
            .wait(&JobId::from(id.as_str()), &req.conditions, timeout)
            .await?,
    ))
}

fn secs(what: &'static str, v: f64) -> Result<Duration, ApiError> {
    if v.is_finite() && (0.0..1e9).contains(&v) {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(Error::InvalidValue {
            what,
            input: v.to_string(),
            message: "must be a number of seconds".into(),
        }
        .into())
    }
}

/// Long poll: answers when the job ends or leaves the foreground.
async fn foreground(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<crate::manager::Foreground> {
    Ok(Json(s.manager.await_foreground(&JobId::from(id.as_str())).await?))
}

async fn kill(
    State(s): State<AppState>,
    Path(id): Path<String>,
    req: Result<Json<KillRequest>, JsonRejection>,
) -> ApiResult<crate::manager::KillOutcome> {
    let req = body(req)?;
    Ok(Json(s.manager.kill(&JobId::from(id.as_str()), req).await?))
}

async fn resume(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<JobView> {
    let job = s
        .manager
        .resume_from(&JobId::from(id.as_str()), super::state::client(&headers))
        .await?;
    Ok(Json(view(&s.manager, &job.id).await?))
}

async fn background(
    State(s): State<AppState>,
    Path(id): Path<String>,
    req: Result<Json<BackgroundRequest>, JsonRejection>,
) -> ApiResult<crate::model::JobInfo> {
    let req = body(req)?;
    let by = req.by.unwrap_or(EndedBy::User);
    Ok(Json(s.manager.background(&JobId::from(id.as_str()), by)?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    #[serde(default)]
    since: Option<u64>,
    #[serde(default)]
    limit: Option<usize>,
}

async fn events(
    State(s): State<AppState>,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> ApiResult<EventsPage> {
    let Query(q) = q?;
    let page = s
        .manager
        .events_page(q.since.unwrap_or(1), q.limit.unwrap_or(MAX_PAGE_ITEMS));
    Ok(Json(EventsPage {
        events: page.events,
        next_seq: page.next_seq,
        more: page.more,
    }))
}

/// SSE: every event with seq ≥ `since`, then new ones as they happen.
async fn follow_events(
    State(s): State<AppState>,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let Query(q) = q?;
    // Subscribe before reading the backlog so nothing falls in between.
    let rx = s.manager.events_log().subscribe();
    let log = s.manager.events_log().clone();
    let start = (rx, q.since.unwrap_or(1));
    let events = stream::unfold(start, move |(mut rx, next)| {
        let log = log.clone();
        async move {
            loop {
                // A page at a time, bounded in bytes as `GET /v1/events` is.
                let (backlog, _) = crate::manager::take_page(log.since(next, MAX_PAGE_ITEMS), MAX_PAGE_ITEMS);
                if let Some(last) = backlog.last() {
                    let next = last.seq + 1;
                    let batch: Vec<_> = backlog
                        .iter()
                        .map(|e| {
                            Ok(SseEvent::default()
                                .event("event")
                                .json_data(e)
                                .expect("events serialize"))
                        })
                        .collect();
                    return Some((batch, (rx, next)));
                }
                match rx.recv().await {
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return None,
                }
            }
        }
    })
    .flat_map(stream::iter);
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

async fn wait_for_port(
    State(s): State<AppState>,
    req: Result<Json<WaitForPortRequest>, JsonRejection>,
) -> ApiResult<crate::manager::PortWait> {
    let req = body(req)?;
    let timeout = secs("timeout", req.timeout.unwrap_or(DEFAULT_WAIT_SECS))?;
    Ok(Json(s.manager.wait_for_port(&req.host, req.port, timeout).await?))
}

async fn prune(
    State(s): State<AppState>,
    req: Result<Json<crate::manager::PruneRequest>, JsonRejection>,
) -> ApiResult<crate::manager::PruneOutcome> {
    let req = body(req)?;
    // SQLite deletes and directory removals: off the async workers.
    let manager = s.manager.clone();
    let pruned = tokio::task::spawn_blocking(move || manager.prune(&req))
        .await
        .map_err(|e| {
            ApiError::from(Error::io(
                "prune history",
                "the store",
                std::io::Error::other(e.to_string()),
            ))
        })?;
    Ok(Json(pruned?))
}

async fn shutdown(State(s): State<AppState>) -> (StatusCode, Json<serde_json::Value>) {
    s.shutdown.cancel();
    (
        StatusCode::ACCEPTED,
        Json(serde_json::json!({"shutting_down": true})),
    )
}
