//! The request extractors of the API, whose every rejection is problem+json with a bounded
//! message.

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Path, Request},
    http::{StatusCode, header, request::Parts},
};
use serde::de::DeserializeOwned;

use super::problem::{ApiError, MAX_MESSAGE, clipped};

/// A JSON body whose rejections (bad JSON, wrong content type, too large) are problem+json.
pub struct ApiJson<T>(pub T);

/// Whether the request says its body is JSON (`application/json`, `application/*+json`).
fn is_json(req: &Request) -> bool {
    let Some(ct) = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|s| s.ends_with("+json"))
}

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(&req) {
            return Err(ApiError::UnsupportedMedia(
                "expected Content-Type: application/json".into(),
            ));
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|r| match r.status() {
                StatusCode::PAYLOAD_TOO_LARGE => ApiError::TooLarge(crate::http::body_limit()),
                _ => ApiError::BadRequest(clipped(MAX_MESSAGE, r)),
            })?;
        match axum::Json::<T>::from_bytes(&bytes) {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            // The message is formatted only up to its cap: serde quotes a mistyped value
            // whole, and it may be megabytes long.
            Err(r) if r.status() == StatusCode::UNPROCESSABLE_ENTITY => {
                Err(ApiError::invalid("", clipped(MAX_MESSAGE, r)))
            }
            Err(r) => Err(ApiError::BadRequest(clipped(MAX_MESSAGE, r))),
        }
    }
}

/// Path parameters whose rejections (a wrong type, a number out of range) are problem+json
/// 400s naming the parameter.
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| ApiPath(v))
            .map_err(|r| ApiError::BadRequest(clipped(MAX_MESSAGE, r)))
    }
}
