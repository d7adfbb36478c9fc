//! The request extractors of the API, whose every rejection is problem+json, and the one
//! check of path and query parameters.
//!
//! PostgreSQL's `text` and `jsonb` cannot store U+0000 (NUL), and sending one gave a 500.
//! NUL is refused before any handler runs: in a JSON body by [`ApiJson`] (422 naming the
//! JSON pointer of the string or key holding it), in a path or query parameter by
//! [`refuse_nul_params`] (400 naming the parameter). It is the only character PostgreSQL
//! refuses in UTF-8 text and jsonb: invalid UTF-8 and lone surrogates never get past the JSON
//! parser, a path parameter that does not decode to UTF-8 is refused here too, and a query
//! is decoded lossily (U+FFFD).

use axum::{
    body::Bytes,
    extract::{
        FromRequest, FromRequestParts, Path, RawPathParams, Request,
        rejection::{BytesRejection, RawPathParamsRejection},
    },
    http::{StatusCode, header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{
    problem::{ApiError, MAX_MESSAGE, clipped, quote},
    query_pairs,
};

const NUL_MESSAGE: &str = "contains U+0000 (NUL), which cannot be stored; remove it";

/// A JSON body whose rejections (bad JSON, wrong content type, too large, a NUL character)
/// are problem+json.
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
            .map_err(body_rejection)?;
        if let Some(found) = nul_pointer_in_json(&bytes) {
            return Err(nul_problem(found));
        }
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

/// The problem answering a body that could not be read: 413 past the body limit, else 400.
pub(crate) fn body_rejection(r: BytesRejection) -> ApiError {
    match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::TooLarge(crate::http::body_limit()),
        _ => ApiError::BadRequest(clipped(MAX_MESSAGE, r)),
    }
}

/// The JSON pointer of the first string or object key holding U+0000 in the JSON text
/// `bytes` (for a key, the pointer of the object holding it, and `true`), or `None`. Only a
/// body whose text has a `\u0000` escape is parsed for it (a raw NUL is not valid JSON).
fn nul_pointer_in_json(bytes: &[u8]) -> Option<(String, bool)> {
    const ESCAPE: &[u8] = b"\\u0000";
    // memmem, not `windows().any()`: a 16 MB body (a WASM bundle in base64) took 0.3 s of
    // CPU per request in a debug build with the byte-by-byte scan.
    memchr::memmem::find(bytes, ESCAPE)?;
    // Invalid JSON: the typed parse that follows says why. `\\u0000` (an escaped backslash
    // before "u0000") is no NUL: the walk finds none.
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let mut at = String::new();
    let mut key = false;
    nul_at(&v, &mut at, &mut key).then_some((at, key))
}

/// The 422 naming the first string or object key of `v` holding U+0000 (PostgreSQL cannot
/// store it), or `None`.
pub(crate) fn nul_in_value(v: &Value) -> Option<ApiError> {
    let mut at = String::new();
    let mut key = false;
    nul_at(v, &mut at, &mut key).then(|| nul_problem((at, key)))
}

/// The 422 for a U+0000 found at `at` (in a key of the object there when `key`).
fn nul_problem((at, key): (String, bool)) -> ApiError {
    let what = if key {
        "a key of this object"
    } else {
        "this string"
    };
    ApiError::invalid(&at, format!("{what} {NUL_MESSAGE}"))
}

/// Whether `v` holds U+0000 in a string or key; `at` is left at its pointer when it does, and
/// `key` says whether a key holds it. (Depth is bounded by the JSON parser's nesting limit.)
fn nul_at(v: &Value, at: &mut String, key: &mut bool) -> bool {
    let children: Box<dyn Iterator<Item = (String, &Value)>> = match v {
        Value::String(s) => return s.contains('\0'),
        Value::Object(map) if map.keys().any(|k| k.contains('\0')) => {
            *key = true;
            return true;
        }
        Value::Object(map) => Box::new(
            map.iter()
                .map(|(k, item)| (converge_proto::json_pointer::escape(k), item)),
        ),
        Value::Array(items) => Box::new(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| (i.to_string(), item)),
        ),
        _ => return false,
    };
    for (token, item) in children {
        let len = at.len();
        at.push('/');
        at.push_str(&token);
        if nul_at(item, at, key) {
            return true;
        }
        at.truncate(len);
    }
    false
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

/// The middleware (on every API route) refusing a path or query parameter that holds
/// U+0000 (or whose percent-decoding is not UTF-8): 400 naming the parameter.
pub async fn refuse_nul_params(req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    match RawPathParams::from_request_parts(&mut parts, &()).await {
        Ok(params) => {
            if let Some((name, value)) = params.iter().find(|(_, v)| v.contains('\0')) {
                return ApiError::BadRequest(format!(
                    "path parameter {{{name}}} {} {NUL_MESSAGE}",
                    quote(value)
                ))
                .into_response();
            }
        }
        // A route without parameters.
        Err(RawPathParamsRejection::MissingPathParams(_)) => {}
        Err(r) => return ApiError::BadRequest(clipped(MAX_MESSAGE, r)).into_response(),
    }
    if let Some((k, v)) = query_pairs(parts.uri.query())
        .into_iter()
        .find(|(k, v)| k.contains('\0') || v.contains('\0'))
    {
        let what = if k.contains('\0') {
            format!("query parameter name {}", quote(&k))
        } else {
            format!("query parameter {} value {}", quote(&k), quote(&v))
        };
        return ApiError::BadRequest(format!("{what} {NUL_MESSAGE}")).into_response();
    }
    next.run(Request::from_parts(parts, body)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_pointer_of_a_nul() {
        let at = |s: &str| nul_pointer_in_json(s.as_bytes());
        let value = |p: &str| Some((p.to_string(), false));
        assert_eq!(
            at(r#"{"spec": {"a": ["x", "b\u0000"]}}"#),
            value("/spec/a/1")
        );
        assert_eq!(
            at(r#"{"labels": {"k\u0000": "v"}}"#),
            Some(("/labels".into(), true))
        );
        assert_eq!(at(r#"{"a/b~": "\u0000"}"#), value("/a~1b~0"));
        assert_eq!(at(r#""\u0000""#), value(""));
        assert_eq!(at(r#"{"a": "\\u0000"}"#), None, "an escaped backslash");
        assert_eq!(at(r#"{"a": "\u0001"}"#), None);
        assert_eq!(
            at(r#"{"a": "\u0000"#),
            None,
            "invalid JSON is left to the parser"
        );
    }
}
