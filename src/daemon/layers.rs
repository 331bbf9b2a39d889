//! The layer routes: `GET /v1/layers` (every layer), `GET /v1/layers/{layer}`,
//! `POST /v1/layers/{layer}/diff`, `POST /v1/layers/{layer}/apply` and
//! `DELETE /v1/layers/{layer}`; `{layer}` is a layer's name or the id of a
//! job that wrote it. The socket's callers are the user's (its 0600 mode):
//! an apply here has no agent's guard; agents apply through MCP.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};

use super::state::{ApiError, AppState};
use crate::api::{ApplyRequest, DiffAnswer, DiffRequest, MAX_DIFF_BYTES};
use crate::layers::diff::Form;
use crate::model::{Applied, LayerInfo};

type ApiResult<T> = Result<Json<T>, ApiError>;

pub async fn list(State(s): State<AppState>) -> ApiResult<Vec<LayerInfo>> {
    Ok(Json(s.manager.layer_list().await))
}

pub async fn info(State(s): State<AppState>, Path(layer): Path<String>) -> ApiResult<LayerInfo> {
    Ok(Json(s.manager.layer_info(&layer).await?))
}

pub async fn diff(
    State(s): State<AppState>,
    Path(layer): Path<String>,
    req: Result<Json<DiffRequest>, JsonRejection>,
) -> ApiResult<DiffAnswer> {
    let Json(req) = req?;
    let form = if req.patch { Form::Patch } else { Form::Stat };
    let name = s.manager.layer_name(&layer)?;
    let text = s
        .manager
        .layer_diff(&name, req.paths, form, MAX_DIFF_BYTES)
        .await?;
    Ok(Json(DiffAnswer { layer: name, text }))
}

pub async fn apply(
    State(s): State<AppState>,
    Path(layer): Path<String>,
    req: Result<Json<ApplyRequest>, JsonRejection>,
) -> ApiResult<Applied> {
    let Json(req) = req?;
    Ok(Json(s.manager.layer_apply(&layer, req.paths, None).await?))
}

pub async fn discard(State(s): State<AppState>, Path(layer): Path<String>) -> ApiResult<serde_json::Value> {
    let name = s.manager.layer_discard(&layer).await?;
    Ok(Json(serde_json::json!({ "discarded": name })))
}
