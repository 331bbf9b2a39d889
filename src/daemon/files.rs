//! `GET /v1/jobs/{id}/archive?path=P`: files out of a running container
//! job (`berth cp`), as the engine's tar of them, base64 in a JSON answer
//! so every client reads it like any other (at most 64 MiB of tar).

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use base64::Engine as _;
use serde::Deserialize;

use super::state::{ApiError, AppState};
use crate::api::Archive;
use crate::model::JobId;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveQuery {
    path: String,
}

pub async fn archive(
    State(s): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<ArchiveQuery>, QueryRejection>,
) -> Result<Json<Archive>, ApiError> {
    let Query(q) = q?;
    let id = JobId::from(id.as_str());
    let tar = s.manager.copy_out(&id, &q.path).await?;
    Ok(Json(Archive {
        job: id,
        path: q.path,
        bytes: tar.len() as u64,
        tar: base64::engine::general_purpose::STANDARD.encode(&tar),
    }))
}
