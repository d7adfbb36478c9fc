//! The HTTP error type and its one conversion to RFC 7807 `application/problem+json`.
//! Internal detail goes to the log; clients get a stable status and a useful message.
//!
//! A problem is bounded whatever the request held: at most [`MAX_LISTED`] located errors
//! (`errors_omitted` counts the rest), each location and message clipped, the whole body under
//! [`MAX_PROBLEM_BYTES`]; the `detail` summarises (how many, and the first), it never repeats
//! the list. Messages quote request values through [`quote`] and [`quote_value`] (a short
//! prefix) and are built through [`clipped`], which stops formatting at its cap, so a large
//! value is never copied into a message only to be cut afterwards.

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use converge_kinds::Violation;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use converge_kinds::text::{ELLIPSIS, clip_in_place};
/// The bounded quoting every message uses, stated once with the kinds' rules (a kind's
/// violation and an API problem quote a value the same way).
pub use converge_kinds::text::{
    MAX_LISTED, MAX_LOCATION, MAX_MESSAGE, QUOTE_BYTES, clipped, quote, quote_value,
};

/// The largest problem body, in bytes.
pub const MAX_PROBLEM_BYTES: usize = 64 * 1024;
/// The longest `detail`, in bytes.
pub const MAX_DETAIL: usize = 2048;

/// One failing location of a 422 problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    /// JSON pointer into the request body (e.g. `/spec/greeting`), or the name of the
    /// query parameter.
    pub location: String,
    /// What is wrong.
    pub message: String,
    /// The JSON Schema keyword that failed (`maxLength`, `type`, ...), for schema violations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyword: Option<String>,
}

impl FieldError {
    /// A problem at `location` that no schema keyword names.
    pub fn new(location: String, message: String) -> FieldError {
        FieldError {
            location,
            message,
            keyword: None,
        }
    }
}

/// A kind's violation as one located error of a problem.
impl From<Violation> for FieldError {
    fn from(v: Violation) -> FieldError {
        FieldError {
            location: v.pointer,
            message: v.message,
            keyword: v.keyword,
        }
    }
}

/// `violations` as a problem's located errors.
pub fn field_errors(violations: impl IntoIterator<Item = Violation>) -> Vec<FieldError> {
    violations.into_iter().map(FieldError::from).collect()
}

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
        /// Each failing location (at most [`MAX_LISTED`] are shown).
        errors: Vec<FieldError>,
        /// How many more problems were found and not listed.
        omitted: usize,
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
    /// 429: a rate limit refused the call; the client may retry after `retry_after`
    /// seconds (sent as `Retry-After`).
    #[error("{detail}")]
    TooManyRequests {
        /// Which limit, and its rate.
        detail: String,
        /// Whole seconds until the limit lets the next call through.
        retry_after: u64,
    },
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

    /// A 422 listing the located problems (`omitted` more were found and not kept). Its
    /// detail is a summary, never the list: `"{summary}: /a msg"` for one problem,
    /// `"{summary}: N problems; first at /a: msg"` for more.
    pub fn fields(summary: &str, mut errors: Vec<FieldError>, omitted: usize) -> ApiError {
        let total = errors.len() + omitted;
        // Clipped first, so the count and the first location always show.
        let summary = clipped(512, summary);
        let detail = match errors.first() {
            None => clipped(MAX_DETAIL, summary),
            Some(first) => {
                let msg = clipped(256, &first.message);
                let loc = clipped(MAX_LOCATION, &first.location);
                match (total, loc.is_empty()) {
                    (1, true) => clipped(MAX_DETAIL, format_args!("{summary}: {msg}")),
                    (1, false) => clipped(MAX_DETAIL, format_args!("{summary}: {loc} {msg}")),
                    (_, true) => clipped(
                        MAX_DETAIL,
                        format_args!("{summary}: {total} problems; first: {msg}"),
                    ),
                    (_, false) => clipped(
                        MAX_DETAIL,
                        format_args!("{summary}: {total} problems; first at {loc}: {msg}"),
                    ),
                }
            }
        };
        let kept = errors.len().min(MAX_LISTED);
        let omitted = omitted + (errors.len() - kept);
        errors.truncate(kept);
        ApiError::Invalid {
            detail,
            errors,
            omitted,
        }
    }

    /// [`ApiError::fields`] when there is a problem, else `Ok`.
    pub fn check_fields_omitted(
        summary: &str,
        errors: Vec<FieldError>,
        omitted: usize,
    ) -> Result<(), ApiError> {
        if errors.is_empty() && omitted == 0 {
            return Ok(());
        }
        Err(Self::fields(summary, errors, omitted))
    }

    /// [`ApiError::check_fields_omitted`] with every problem kept.
    pub fn check_fields(summary: &str, errors: Vec<FieldError>) -> Result<(), ApiError> {
        Self::check_fields_omitted(summary, errors, 0)
    }

    /// A 422 with one location; its detail is `"{location}: {message}"`.
    pub fn invalid(location: &str, message: impl Into<String>) -> ApiError {
        let mut message = message.into();
        clip_in_place(&mut message, MAX_MESSAGE);
        let mut location = location.to_string();
        clip_in_place(&mut location, MAX_LOCATION);
        ApiError::Invalid {
            detail: format!("{location}: {message}"),
            errors: vec![FieldError::new(location, message)],
            omitted: 0,
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
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An RFC 9457 problem, the body of every error this API answers (as
/// `application/problem+json`), and of each failed item of a batch.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub struct Problem {
    /// Always `about:blank`: the status says what kind of problem it is.
    #[serde(rename = "type")]
    #[schema(example = "about:blank")]
    pub type_: &'static str,
    /// The status's reason phrase.
    pub title: &'static str,
    /// The HTTP status.
    #[schema(minimum = 400, maximum = 599)]
    pub status: u16,
    /// What went wrong, for a person: a summary (how many, and the first) when many
    /// locations failed. At most 2048 bytes.
    pub detail: String,
    /// Each failing location (422 only), at most 50; the whole body stays under 64 KiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<FieldError>>,
    /// How many more failing locations were found and not listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub errors_omitted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The errors a problem lists: each clipped, in order, while the running size stays within
/// `budget` bytes and the count within [`MAX_LISTED`]; and how many were left off.
fn listed(
    errors: Vec<FieldError>,
    budget: usize,
    limits: &ProblemLimits,
) -> (Vec<FieldError>, usize) {
    let total = errors.len();
    let mut out = Vec::with_capacity(total.min(MAX_LISTED));
    let mut used = 0;
    for mut e in errors.into_iter().take(MAX_LISTED) {
        clip_in_place(&mut e.location, limits.location);
        clip_in_place(&mut e.message, limits.message);
        // The serialised size (escapes can make it up to 6x the text).
        let size = serde_json::to_vec(&e).map_or(usize::MAX, |v| v.len() + 1);
        if used + size > budget {
            break;
        }
        used += size;
        out.push(e);
    }
    let left_off = total - out.len();
    (out, left_off)
}

/// How large a problem may grow: [`ApiError::into_problem`] answers one request within
/// [`PROBLEM_LIMITS`], a failed item of a batch within [`ITEM_PROBLEM_LIMITS`].
#[derive(Debug, Clone, Copy)]
pub struct ProblemLimits {
    /// The whole problem, serialised, in bytes.
    pub total: usize,
    /// The `detail`, serialised (quotes and escapes included), in bytes.
    pub detail_json: usize,
    /// One located error's message, in bytes of text.
    pub message: usize,
    /// One located error's location, in bytes of text.
    pub location: usize,
}

/// A request's problem: [`MAX_PROBLEM_BYTES`] in all, a `detail` of [`MAX_DETAIL`] bytes of
/// text (up to six times that escaped).
pub const PROBLEM_LIMITS: ProblemLimits = ProblemLimits {
    total: MAX_PROBLEM_BYTES,
    detail_json: 6 * MAX_DETAIL + 2,
    message: MAX_MESSAGE,
    location: MAX_LOCATION,
};

/// The largest problem of one failed batch item, serialised, in bytes.
pub const MAX_ITEM_PROBLEM_BYTES: usize = 2048;

/// A batch item's problem: [`MAX_ITEM_PROBLEM_BYTES`] in all, so that a batch of thousands
/// of failing items answers in a few MiB (`resource_batch`).
pub const ITEM_PROBLEM_LIMITS: ProblemLimits = ProblemLimits {
    total: MAX_ITEM_PROBLEM_BYTES,
    detail_json: 512,
    message: 256,
    location: 256,
};

/// Room for a problem's fixed fields (`type`, `title`, `status`, the `errors` brackets and
/// `errors_omitted`), serialised.
const FIXED_FIELDS: usize = 192;

/// How many bytes `c` takes inside a JSON string as serde_json writes it.
fn json_char_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// `s` cut (with "…") so that it serialises as a JSON string of at most `max` bytes.
fn clip_json(s: &mut String, max: usize) {
    // Less the quotes.
    let room = max.saturating_sub(2);
    if s.chars().map(json_char_len).sum::<usize>() <= room {
        return;
    }
    let (mut used, mut cut) = (0, 0);
    for (i, c) in s.char_indices() {
        let n = json_char_len(c);
        if used + n + ELLIPSIS.len_utf8() > room {
            break;
        }
        used += n;
        cut = i + c.len_utf8();
    }
    s.truncate(cut);
    s.push(ELLIPSIS);
}

impl ApiError {
    /// The status and the problem+json body this error answers with (its `IntoResponse`).
    /// A 500's cause is logged here, never returned.
    pub(crate) fn into_problem(self) -> (StatusCode, Value) {
        let (status, body) = self.into_problem_within(&PROBLEM_LIMITS);
        let body = serde_json::to_value(body).unwrap_or(Value::Null);
        (status, body)
    }

    /// The status and the problem this error answers with, serialising to at most
    /// `limits.total` bytes: the `detail` clipped, the located errors each clipped and listed
    /// while they fit, the rest counted in `errors_omitted`. A 500's cause is logged here.
    pub(crate) fn into_problem_within(self, limits: &ProblemLimits) -> (StatusCode, Problem) {
        let status = self.status();
        if let ApiError::Internal { op, source } = &self {
            tracing::error!(op, error = %source, "internal error");
        }
        let mut detail = clipped(MAX_DETAIL, &self);
        clip_json(&mut detail, limits.detail_json);
        let (errors, errors_omitted) = match self {
            ApiError::Invalid {
                errors, omitted, ..
            } => {
                // Room for everything but the list: the fixed fields and the detail as
                // serialised (JSON escapes can make it up to 6x its text).
                let detail_json =
                    serde_json::to_vec(&detail).map_or(limits.detail_json, |v| v.len());
                let budget = limits.total.saturating_sub(FIXED_FIELDS + detail_json);
                let (kept, left_off) = listed(errors, budget, limits);
                (Some(kept), omitted + left_off)
            }
            _ => (None, 0),
        };
        let body = Problem {
            type_: "about:blank",
            title: status.canonical_reason().unwrap_or("Error"),
            status: status.as_u16(),
            detail,
            errors,
            errors_omitted,
        };
        (status, body)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = match &self {
            ApiError::TooManyRequests { retry_after, .. } => Some(*retry_after),
            _ => None,
        };
        let (status, body) = self.into_problem();
        let mut resp = (status, axum::Json(body)).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if status == StatusCode::SERVICE_UNAVAILABLE {
            // Both causes (the database, the watch limit) pass; a client need not hammer.
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        if let Some(secs) = retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"converge\""),
            );
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn quotes_are_short_prefixes() {
        assert_eq!(quote("abc"), "\"abc\"");
        assert_eq!(quote("a\0b"), "\"a\\0b\"");
        let long = "x".repeat(10_000);
        let q = quote(&long);
        assert_eq!(q, format!("\"{}…\"", "x".repeat(QUOTE_BYTES)));
        // A multi-byte character at the cut is not split.
        let q = quote(&"é".repeat(100));
        assert!(q.ends_with("…\"") && q.len() < QUOTE_BYTES + 8, "{q}");

        assert_eq!(quote_value(&json!("eighty")), "\"eighty\"");
        assert_eq!(quote_value(&json!(5)), "5");
        let q = quote_value(&json!(long));
        assert_eq!(q, format!("\"{}…\"", "x".repeat(QUOTE_BYTES)));
        let q = quote_value(&json!((0..10_000).collect::<Vec<_>>()));
        assert!(q.starts_with("[0,1,2") && q.ends_with('…'), "{q}");
        assert!(q.len() <= QUOTE_BYTES + 3, "{q}");
    }

    #[test]
    fn clipped_stops_formatting_at_the_cap() {
        assert_eq!(clipped(5, "abc"), "abc");
        assert_eq!(clipped(5, "abcdefgh"), "abcde…");
        assert_eq!(clipped(3, format_args!("{}{}", "ab", "cd")), "abc…");
    }

    async fn body_of(e: ApiError) -> (StatusCode, Vec<u8>) {
        let r = e.into_response();
        let s = r.status();
        let b = axum::body::to_bytes(r.into_body(), usize::MAX)
            .await
            .unwrap();
        (s, b.to_vec())
    }

    #[tokio::test]
    async fn a_problem_is_bounded_whatever_it_holds() {
        // 64 KiB a string (64 times the largest message), 10,000 of them: 1.3 GB to build.
        // (1 MiB each needed 20 GB, more than a shared test machine has to spare.)
        let huge = "\u{1}".repeat(1 << 16);
        let errors: Vec<FieldError> = (0..10_000)
            .map(|i| FieldError::new(format!("/a/{i}/{huge}"), huge.clone()))
            .collect();
        let e = ApiError::check_fields(&huge, errors).unwrap_err();
        let (s, body) = body_of(e).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(body.len() <= MAX_PROBLEM_BYTES, "{} bytes", body.len());
        let v: Value = serde_json::from_slice(&body).unwrap();
        let listed = v["errors"].as_array().unwrap().len();
        assert!((1..=MAX_LISTED).contains(&listed), "{listed}");
        assert_eq!(
            v["errors_omitted"].as_u64().unwrap() as usize + listed,
            10_000
        );
        assert!(v["detail"].as_str().unwrap().contains("10000 problems"));

        let (_, body) = body_of(ApiError::NotFound(huge.clone())).await;
        assert!(body.len() <= MAX_PROBLEM_BYTES, "{} bytes", body.len());
        let (_, body) = body_of(ApiError::invalid(&huge, huge.clone())).await;
        assert!(body.len() <= MAX_PROBLEM_BYTES, "{} bytes", body.len());
    }

    #[test]
    fn an_item_problem_is_bounded_by_its_escaped_size() {
        // Control characters escape to six bytes each: a text cap alone would not hold.
        for text in ["x", "\u{1}", "\"", "é"] {
            let huge = text.repeat(100_000);
            let errors: Vec<FieldError> = (0..200)
                .map(|i| FieldError::new(format!("/spec/{i}/{huge}"), huge.clone()))
                .collect();
            let e = ApiError::fields(&huge, errors, 7);
            let (status, problem) = e.into_problem_within(&ITEM_PROBLEM_LIMITS);
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
            let body = serde_json::to_vec(&problem).unwrap();
            assert!(
                body.len() <= MAX_ITEM_PROBLEM_BYTES,
                "{text:?}: {} bytes",
                body.len()
            );
            let v: Value = serde_json::from_slice(&body).unwrap();
            let listed = v["errors"].as_array().map_or(0, Vec::len) as u64;
            let omitted = v["errors_omitted"].as_u64().unwrap_or(0);
            assert_eq!(listed + omitted, 200 + 7, "{text:?}: every problem counted");
            assert!(v["detail"].as_str().unwrap().ends_with('…'), "{text:?}");
        }
        // A short problem is whole.
        let (_, p) = ApiError::invalid("/name", "bad").into_problem_within(&ITEM_PROBLEM_LIMITS);
        assert_eq!(p.detail, "/name: bad");
        assert_eq!(p.errors.unwrap()[0].message, "bad");
    }

    #[tokio::test]
    async fn one_problem_keeps_its_detail_and_many_are_summarised() {
        let (_, body) = body_of(ApiError::invalid("/verb", "no operation \"x\"")).await;
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["detail"], "/verb: no operation \"x\"");
        assert_eq!(v["errors"][0]["location"], "/verb");
        assert!(v.get("errors_omitted").is_none(), "{v}");

        let e = ApiError::check_fields_omitted(
            "x does not satisfy kind \"k\"",
            vec![
                FieldError::new("/spec/a".into(), "bad a".into()),
                FieldError::new("/spec/b".into(), "bad b".into()),
            ],
            3,
        )
        .unwrap_err();
        let (_, body) = body_of(e).await;
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v["detail"],
            "x does not satisfy kind \"k\": 5 problems; first at /spec/a: bad a"
        );
        assert_eq!(v["errors"].as_array().unwrap().len(), 2);
        assert_eq!(v["errors_omitted"], 3);
    }
}
