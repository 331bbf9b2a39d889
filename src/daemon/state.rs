//! What every route of the socket API shares: the state ([`AppState`]) and
//! how an error is answered ([`ApiError`]: the status and code from
//! `Error::http_status`/`Error::code`, the body `{"error": {code, message}}`).

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

use crate::api::{ErrorBody, ErrorDetail};
use crate::error::Error;
use crate::manager::Manager;

/// Shared state of the routes.
#[derive(Clone)]
pub struct AppState {
    pub manager: Manager,
    /// The daemon's root token, cancelled by `POST /v1/shutdown` (as by a
    /// signal): everything the daemon serves winds down from it.
    pub shutdown: CancellationToken,
    /// MCP sessions attached over `POST /v1/mcp`.
    pub sessions: crate::mcp::session::Sessions,
}

/// An error on its way to the client.
pub struct ApiError {
    pub(super) status: StatusCode,
    pub(super) code: String,
    pub(super) message: String,
}

impl ApiError {
    /// A request the route cannot serve as sent (400 `bad_request`).
    pub(super) fn bad_request(message: String) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "bad_request".into(),
            message,
        }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError {
            status: StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            code: e.code().into(),
            message: e.to_string(),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let status = match &r {
            JsonRejection::BytesRejection(_) => StatusCode::PAYLOAD_TOO_LARGE,
            JsonRejection::MissingJsonContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError {
            status,
            code: "bad_request".into(),
            message: format!("malformed request body: {}", r.body_text()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "bad_request".into(),
            message: format!("malformed query string: {}", r.body_text()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        };
        (self.status, Json(body)).into_response()
    }
}

/// Who a request says it is (see [`crate::api::client_name`]).
pub(super) fn client(headers: &axum::http::HeaderMap) -> &'static str {
    crate::api::client_name(
        headers
            .get(crate::api::CLIENT_HEADER)
            .and_then(|v| v.to_str().ok()),
    )
}
