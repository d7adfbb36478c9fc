//! The HTTP error type and its one conversion to RFC 7807 `application/problem+json`.
//! Internal detail goes to the log; clients get a stable status and a useful message.

use axum::{
    extract::{FromRequest, Request, rejection::JsonRejection},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use crate::app::schemas::FieldError;

/// An API error.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 401: no credential, or one nobody holds.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: the caller's role is too weak for this call.
    #[error("{0}")]
    Forbidden(String),
    /// 404.
    #[error("{0}")]
    NotFound(String),
    /// 422 with the failing locations.
    #[error("{detail}")]
    Invalid {
        /// Summary.
        detail: String,
        /// Each failing location.
        errors: Vec<FieldError>,
    },
    /// 409.
    #[error("{0}")]
    Conflict(String),
    /// 400 (malformed request: bad JSON, bad query).
    #[error("{0}")]
    BadRequest(String),
    /// 413.
    #[error("request body is larger than the {0}-byte limit")]
    TooLarge(usize),
    /// 415.
    #[error("{0}")]
    UnsupportedMedia(String),
    /// 503.
    #[error("{0}")]
    Unavailable(String),
    /// 500; the cause is logged, never returned.
    #[error("internal error while trying to {op}")]
    Internal {
        /// What the server was doing.
        op: &'static str,
        /// The cause.
        #[source]
        source: sqlx::Error,
    },
}

impl ApiError {
    /// Maps a database error for operation `op` to a 500.
    pub fn db(op: &'static str) -> impl FnOnce(sqlx::Error) -> ApiError {
        move |source| ApiError::Internal { op, source }
    }

    /// A 422 listing every located problem, its detail `"{summary}: /a msg; /b msg"`, or
    /// `Ok` when there are none.
    pub fn check_fields(summary: &str, errors: Vec<FieldError>) -> Result<(), ApiError> {
        if errors.is_empty() {
            return Ok(());
        }
        let list = errors
            .iter()
            .map(|e| format!("{} {}", e.location, e.message))
            .collect::<Vec<_>>()
            .join("; ");
        Err(ApiError::Invalid {
            detail: format!("{summary}: {list}"),
            errors,
        })
    }

    /// A 422 with one location.
    pub fn invalid(location: &str, message: impl Into<String>) -> ApiError {
        let message = message.into();
        ApiError::Invalid {
            detail: format!("{location}: {message}"),
            errors: vec![FieldError {
                location: location.to_string(),
                message,
            }],
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMedia(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    type_: &'a str,
    title: &'a str,
    status: u16,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a [FieldError]>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let ApiError::Internal { op, source } = &self {
            tracing::error!(op, error = %source, "internal error");
        }
        let errors = match &self {
            ApiError::Invalid { errors, .. } => Some(errors.as_slice()),
            _ => None,
        };
        let body = Problem {
            type_: "about:blank",
            title: status.canonical_reason().unwrap_or("Error"),
            status: status.as_u16(),
            detail: self.to_string(),
            errors,
        };
        let mut resp = (status, axum::Json(body)).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"converge\""),
            );
        }
        resp
    }
}

/// A JSON body whose rejections (bad JSON, wrong content type, too large) are problem+json.
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    axum::Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(r) => Err(match r.status() {
                StatusCode::PAYLOAD_TOO_LARGE => ApiError::TooLarge(crate::http::body_limit()),
                StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                    ApiError::UnsupportedMedia("expected Content-Type: application/json".into())
                }
                StatusCode::UNPROCESSABLE_ENTITY => ApiError::Invalid {
                    detail: r.body_text(),
                    errors: vec![FieldError {
                        location: "".into(),
                        message: r.body_text(),
                    }],
                },
                _ => ApiError::BadRequest(r.body_text()),
            }),
        }
    }
}
