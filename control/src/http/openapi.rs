//! The HTTP API's OpenAPI 3.1 document and its reference page.
//!
//! The document is generated, never written: each handler carries a `#[utoipa::path]`
//! (method, path, parameters, bodies, statuses) and the router registers a route and its
//! description in one call (`utoipa_axum::routes!`, see [`super::routes`]), so a route
//! cannot be served undocumented nor documented unserved. This module adds what every
//! operation shares: the problem+json error responses (one reusable response per status),
//! the bearer scheme, the tags. `GET /openapi.json` serves it; `/docs` serves Swagger UI,
//! whose files are compiled into the binary from the `utoipa-swagger-ui-vendored` crate, so
//! the page loads nothing from outside this server.
//!
//! Every applied kind is in the served document too: one component per (kind, version) for
//! its spec, status and config schemas ([`kind_component_name`], e.g.
//! `Kind_database_v1_Spec`), built from the process's kind catalog once per catalog snapshot,
//! so every pod's document follows a manifest change as its catalog does. An OpenAPI client
//! generator then types a user's own kinds. The committed document (`converge openapi`) is the
//! one a converge with no kinds serves: the fixed shapes only.

use std::sync::OnceLock;

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Response},
};
use converge_kinds::{Kind, Snapshot};
use serde_json::{Value, json};
use utoipa::{
    Modify, OpenApi,
    openapi::{
        self, Content, HttpMethod, Ref, RefOr, ResponseBuilder,
        security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme},
    },
};
use utoipa_swagger_ui::{Config, SwaggerUi};

use super::{AppState, problem::Problem};

/// Where the document is served.
pub const OPENAPI_PATH: &str = "/openapi.json";
/// Where the reference page is served.
pub const DOCS_PATH: &str = "/docs";
/// The prefix of the versioned API; only its operations take the shared errors and a token.
const API_PREFIX: &str = "/api/v1";

const PROBLEM_JSON: &str = "application/problem+json";

/// Declares a reusable problem+json response (a unit type implementing `ToResponse`), named
/// as the type, so an operation says `(status = 404, response = NotFound)` and the document
/// holds one `$ref` per use.
macro_rules! problem_responses {
    ($($(#[$doc:meta])* $name:ident => $description:literal;)*) => {
        $(
            $(#[$doc])*
            pub struct $name;

            impl<'r> utoipa::ToResponse<'r> for $name {
                fn response() -> (&'r str, RefOr<openapi::Response>) {
                    (stringify!($name), problem_response($description).into())
                }
            }
        )*

        /// Every problem response, for the components section.
        fn problem_components() -> Vec<(&'static str, RefOr<openapi::Response>)> {
            vec![$(<$name as utoipa::ToResponse>::response()),*]
        }
    };
}

problem_responses! {
    /// 400.
    BadRequest => "Malformed request: a path or query parameter of the wrong type or out of \
        range, an unknown query parameter where the route refuses them, a NUL character, or \
        a body that is not JSON.";
    /// 401.
    Unauthorized => "Authentication is on (`AUTH_FILE`) and the request has no bearer token, \
        or one nobody holds.";
    /// 403.
    Forbidden => "The token's role is too weak for this call (the detail names the role \
        needed).";
    /// 404.
    NotFound => "What the path or body names does not exist.";
    /// 409.
    Conflict => "The request is well formed but the current state refuses it (the detail \
        says why).";
    /// 413.
    PayloadTooLarge => "The body is larger than the server's limit (`MAX_BODY_BYTES`).";
    /// 415.
    UnsupportedMediaType => "The body's `Content-Type` is not one this route reads.";
    /// 422.
    Unprocessable => "The body or a parameter is invalid: `errors` locates every problem \
        found (a JSON pointer into the body, or a parameter's name).";
    /// 429.
    TooManyRequests => "A rate limit refused the call (`RATE_LIMIT_PER_PRINCIPAL` for the \
        token's principal, `RATE_LIMIT_PER_ADDRESS` for the client's address); `Retry-After` \
        says in how many seconds the next call is let through.";
    /// 500.
    Internal => "The server failed (the cause is in its log, never in the answer).";
    /// 503.
    Unavailable => "The database is unreachable, or (a watch, the event log) the server holds \
        the most watches it allows (`MAX_WATCHERS`), is stopping, or has its event log held back \
        by a long-running transaction; `Retry-After` says when to try again.";
}

fn problem_response(description: &str) -> openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            PROBLEM_JSON,
            Content::new(Some(Ref::from_schema_name("Problem"))),
        )
        .build()
}

/// The document's frame: metadata and tags. The operations come from the routes and the
/// shared parts from [`Shared`], both added by [`document`].
#[derive(OpenApi)]
#[openapi(
    info(
        title = "converge",
        description = "The converge control plane's HTTP API. Every error is an RFC 9457 \
            problem (`application/problem+json`). With `AUTH_FILE` set, every `/api/v1` call \
            needs `Authorization: Bearer <token>` of a role strong enough (viewer reads, \
            operator acts on resources and bindings, admin writes kinds and provider configs \
            and manages API tokens).",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    components(schemas(Problem, super::wire::ListOrder)),
    tags(
        (name = "resources", description = "Resources: apply, read, list, act on."),
        (name = "views", description = "Read views over the resource tree and its graph."),
        (name = "kinds", description = "Kind manifests and their live operational config."),
        (name = "providerconfigs", description = "Provider configs: per-kind settings and bundles."),
        (name = "reactor-bindings", description = "Reactor bindings: lifecycle transitions wired to reactors."),
        (name = "tokens", description = "API tokens with a life cycle: mint (shown once), list, revoke. Admin only."),
        (name = "cluster", description = "Who is here: the converge processes, their workers, who serves each kind."),
        (name = "meta", description = "Probes, the version, and this document."),
    ),
)]
pub struct ApiDoc;

/// Adds what every operation shares: the problem responses, the bearer scheme, and on each
/// `/api/v1` operation the errors any of them can answer (the NUL and parameter checks, the
/// auth guard, a database failure) and, where it reads a body, the body's errors.
struct Shared;

impl Modify for Shared {
    fn modify(&self, doc: &mut openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.responses.extend(
            problem_components()
                .into_iter()
                .map(|(name, r)| (name.to_string(), r)),
        );
        components.security_schemes.insert(
            "bearer".into(),
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        for (path, item) in doc.paths.paths.iter_mut() {
            if !path.starts_with(API_PREFIX) {
                continue;
            }
            for method in [
                HttpMethod::Get,
                HttpMethod::Put,
                HttpMethod::Post,
                HttpMethod::Delete,
            ] {
                let Some(op) = operation_mut(item, method) else {
                    continue;
                };
                let mut shared = vec![
                    ("400", "BadRequest"),
                    ("401", "Unauthorized"),
                    ("403", "Forbidden"),
                    ("429", "TooManyRequests"),
                    ("500", "Internal"),
                ];
                if op.request_body.is_some() {
                    shared.extend([
                        ("413", "PayloadTooLarge"),
                        ("415", "UnsupportedMediaType"),
                        ("422", "Unprocessable"),
                    ]);
                }
                for (status, name) in shared {
                    op.responses
                        .responses
                        .entry(status.into())
                        .or_insert_with(|| Ref::from_response_name(name).into());
                }
                // The token is optional: without AUTH_FILE the API is open.
                op.security = Some(vec![
                    SecurityRequirement::new("bearer", Vec::<String>::new()),
                    SecurityRequirement::default(),
                ]);
            }
        }
    }
}

/// The examples of the document (`openapi_examples.json`, beside this file): one per named
/// schema of a request or 2xx answer body (`schemas`: the schema's `examples`), and one per
/// inline body (`operations`: by operation id, then `request` or the status, with
/// `:<media type>` for a body that is not `application/json`). They were captured from a real
/// converge serving the hello and classic examples and trimmed; the OpenAPI tests check that
/// every body has one and that each validates against its schema.
pub const EXAMPLES: &str = include_str!("openapi_examples.json");

struct Examples;

impl Modify for Examples {
    fn modify(&self, doc: &mut openapi::OpenApi) {
        let examples: Value =
            serde_json::from_str(EXAMPLES).expect("openapi_examples.json is JSON");
        let components = doc.components.get_or_insert_with(Default::default);
        for (name, example) in examples["schemas"].as_object().into_iter().flatten() {
            use openapi::schema::Schema;
            let Some(RefOr::T(schema)) = components.schemas.get_mut(name) else {
                continue;
            };
            match schema {
                Schema::Object(o) => o.examples = vec![example.clone()],
                Schema::Array(a) => a.examples = vec![example.clone()],
                Schema::OneOf(o) => o.examples = vec![example.clone()],
                Schema::AllOf(a) => a.examples = vec![example.clone()],
                Schema::AnyOf(a) => a.examples = vec![example.clone()],
                _ => {}
            }
        }
        let by_id = examples["operations"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for item in doc.paths.paths.values_mut() {
            for method in [
                HttpMethod::Get,
                HttpMethod::Put,
                HttpMethod::Post,
                HttpMethod::Delete,
            ] {
                let Some(op) = operation_mut(item, method) else {
                    continue;
                };
                let Some(wanted) = op.operation_id.as_ref().and_then(|id| by_id.get(id)) else {
                    continue;
                };
                for (key, example) in wanted.as_object().into_iter().flatten() {
                    let (part, media) = key.split_once(':').unwrap_or((key, "application/json"));
                    let content = if part == "request" {
                        op.request_body
                            .as_mut()
                            .and_then(|b| b.content.get_mut(media))
                    } else {
                        match op.responses.responses.get_mut(part) {
                            Some(RefOr::T(r)) => r.content.get_mut(media),
                            _ => None,
                        }
                    };
                    if let Some(c) = content {
                        c.example = Some(example.clone());
                    }
                }
            }
        }
    }
}

fn operation_mut(
    item: &mut openapi::PathItem,
    method: HttpMethod,
) -> Option<&mut openapi::path::Operation> {
    match method {
        HttpMethod::Get => item.get.as_mut(),
        HttpMethod::Put => item.put.as_mut(),
        HttpMethod::Post => item.post.as_mut(),
        HttpMethod::Delete => item.delete.as_mut(),
        _ => None,
    }
}

/// The API's OpenAPI document (built once per process; the routes are built to get it).
pub fn document() -> &'static openapi::OpenApi {
    static DOC: OnceLock<openapi::OpenApi> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = super::routes().split_for_parts().1;
        // After the routes: a modifier of the derive would run before they are added.
        Shared.modify(&mut doc);
        Examples.modify(&mut doc);
        doc
    })
}

/// The document as served: pretty JSON, the same bytes `converge openapi` prints and
/// `control/openapi.json` holds.
pub fn document_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let mut s = document()
            .to_pretty_json()
            .expect("an OpenAPI document serialises");
        s.push('\n');
        s
    })
}

/// The three schemas of a kind in the document, and the suffix of each one's component.
const KIND_PARTS: [(&str, &str); 3] = [
    ("Spec", "spec_schema"),
    ("Status", "status_schema"),
    ("Config", "config_schema"),
];

/// The component name of `part` (`Spec`, `Status`, `Config`) of (`kind`, `version`):
/// `Kind_<kind>_v<version>_<part>`, every character OpenAPI does not allow in a component
/// name (`^[a-zA-Z0-9._-]+$`) replaced by `_` (a kind's name never has one).
pub fn kind_component_name(kind: &str, version: i32, part: &str) -> String {
    let kind: String = kind
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("Kind_{kind}_v{version}_{part}")
}

/// The document with a component per (kind, version) `kinds` holds (see the module
/// documentation); exactly [`document_json`] when it holds none.
pub fn document_with_kinds(kinds: &Snapshot) -> String {
    if kinds.is_empty() {
        return document_json().to_string();
    }
    let mut doc: Value = serde_json::from_str(document_json()).expect("the document is JSON");
    let schemas = doc["components"]["schemas"]
        .as_object_mut()
        .expect("the document has component schemas");
    for kind in kinds.sorted() {
        for (name, schema) in kind_components(kind) {
            schemas.insert(name, schema);
        }
    }
    let mut text = serde_json::to_string_pretty(&doc).expect("a document serialises");
    text.push('\n');
    text
}

/// The components of one kind: each schema as the manifest declares it, its local `$ref`s
/// pointed at the component (a schema's `#/...` means the document's root once it sits in
/// the document), described; an undeclared one is any object (a spec, a config) or any value
/// (a status).
fn kind_components(kind: &Kind) -> Vec<(String, Value)> {
    let m = &kind.manifest;
    KIND_PARTS
        .iter()
        .map(|(part, field)| {
            let name = kind_component_name(&m.kind, m.kind_version, part);
            let declared = match *field {
                "spec_schema" => m.spec_schema.as_ref(),
                "status_schema" => m.status_schema.as_ref(),
                _ => m.config_schema.as_ref(),
            }
            .filter(|s| !s.is_null());
            let what = format!("The {field} of kind {} version {}", m.kind, m.kind_version);
            let schema = match declared {
                Some(s) => {
                    let mut s = s.clone();
                    if s.get("$id").is_none() {
                        rebase_refs(&mut s, &format!("#/components/schemas/{name}"));
                    }
                    if let Value::Object(o) = &mut s
                        && !o.contains_key("description")
                    {
                        o.insert("description".into(), json!(format!("{what}.")));
                    }
                    s
                }
                None if *part == "Status" => {
                    json!({"description": format!("{what}: none declared, any value.")})
                }
                None => json!({
                    "type": "object",
                    "description": format!("{what}: none declared, any object.")
                }),
            };
            (name, schema)
        })
        .collect()
}

/// Keywords whose values are data, not schemas: a `$ref` inside one is not a reference.
const DATA_KEYWORDS: [&str; 5] = ["const", "enum", "default", "examples", "example"];

/// Points every local JSON-pointer reference (`$ref` / `$dynamicRef` of `#` or `#/...`) of
/// `schema` at `base` (its place in the document). A subschema with an `$id` of its own is a
/// resource of its own (its references resolve against it) and is left as it is, as are
/// data keywords and anchor references (`#name`).
fn rebase_refs(schema: &mut Value, base: &str) {
    match schema {
        Value::Object(o) => {
            for key in ["$ref", "$dynamicRef"] {
                if let Some(Value::String(r)) = o.get_mut(key)
                    && (r == "#" || r.starts_with("#/"))
                {
                    *r = format!("{base}{}", &r[1..]);
                }
            }
            for (k, v) in o.iter_mut() {
                let own_resource = v.get("$id").is_some();
                if DATA_KEYWORDS.contains(&k.as_str()) || own_resource {
                    continue;
                }
                rebase_refs(v, base);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| rebase_refs(v, base)),
        _ => {}
    }
}

/// This OpenAPI document.
///
/// `GET /openapi.json`: this document, with a component per applied (kind, version) for a
/// caller who may read kinds (anyone when authentication is off; with `AUTH_FILE`, a token of
/// any API role).
#[utoipa::path(
    operation_id = "openapi_serve_document", get,
    path = "/openapi.json",
    tag = "meta",
    responses((status = 200, description = "This OpenAPI 3.1 document.", body = Object)),
)]
pub async fn serve_document(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let snapshot = s.catalog.load();
    let body = if snapshot.is_empty() || !super::auth::may_read(&s, &headers).await {
        Bytes::from_static(document_json().as_bytes())
    } else {
        // Built once per catalog snapshot; a clone shares the bytes.
        Bytes::clone(&snapshot.derived(|k| Bytes::from(document_with_kinds(k))))
    };
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// The reference page's routes (`/docs`, which redirects to `/docs/`, and its files). Static
/// files like the UI's, so they are not operations of the document.
pub fn docs_router() -> Router<AppState> {
    SwaggerUi::new(DOCS_PATH)
        .config(Config::from(OPENAPI_PATH).try_it_out_enabled(true))
        .into()
}

#[cfg(test)]
mod tests {
    use converge_kinds::{Kind, Snapshot};
    use serde_json::{Value, json};

    use super::{document_json, document_with_kinds, kind_component_name};

    fn kind(m: Value) -> Kind {
        Kind::compile(serde_json::from_value(m).unwrap(), 1).unwrap()
    }

    #[test]
    fn every_kind_is_a_component_with_its_local_refs_pointing_at_it() {
        assert_eq!(document_with_kinds(&Snapshot::default()), document_json());
        let db = kind(json!({
            "kind": "database", "kind_version": 2,
            "reactions": [{"name": "w", "trigger": "specChange", "emits": ["status"]}],
            "spec_schema": {"type": "object", "$defs": {"size": {"type": "integer"}},
                            "properties": {"size": {"$ref": "#/$defs/size"},
                                           "tag": {"const": {"$ref": "#/kept"}}}},
            "status_schema": {"type": "object", "properties": {"endpoint": {"type": "string"}}}
        }));
        let doc: Value = serde_json::from_str(&document_with_kinds(&Snapshot::of([db]))).unwrap();
        let schemas = &doc["components"]["schemas"];
        let spec = &schemas[kind_component_name("database", 2, "Spec")];
        assert_eq!(
            spec["properties"]["size"]["$ref"],
            "#/components/schemas/Kind_database_v2_Spec/$defs/size"
        );
        // A value that only looks like a reference is data, left as it is.
        assert_eq!(spec["properties"]["tag"]["const"]["$ref"], "#/kept");
        assert_eq!(
            schemas["Kind_database_v2_Status"]["properties"]["endpoint"]["type"],
            "string"
        );
        // No config_schema declared: any object, said so.
        let config = &schemas["Kind_database_v2_Config"];
        assert_eq!(config["type"], "object");
        assert!(
            config["description"]
                .as_str()
                .unwrap()
                .contains("none declared"),
            "{config}"
        );
        // The fixed shapes are all still there.
        let fixed: Value = serde_json::from_str(document_json()).unwrap();
        for name in fixed["components"]["schemas"].as_object().unwrap().keys() {
            assert!(schemas.get(name).is_some(), "{name} lost");
        }
    }
}
