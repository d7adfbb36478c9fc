//! Provider configs: `POST /api/v1/providerconfigs` (create or replace by name),
//! `GET /api/v1/providerconfigs` (offset pages, filters `kind`, `name`, `default`),
//! `GET` and `DELETE /api/v1/providerconfigs/{name}`. A config's spec must satisfy its kind's
//! `config_schema` (422); its bundle (`data`, base64) is at most `MAX_BUNDLE_BYTES` (10 MiB
//! by default); a kind version has at most one default (409). A spec with a top-level `resources` array is a CEL resource graph
//! (stdworker's cel provider) and must compile, every problem located (422); its value flows
//! must type-check against the kinds they join (a pointer the upstream's `status_schema` or
//! the dependent's `spec_schema` cannot have, or types that cannot meet, is a 422 naming
//! both pointers and both kinds; a flow joining an unregistered kind is a `warnings` entry
//! in the answer). A spec with a `sample_spec` object (a spec of the kind) has its
//! Starlark bundle composed with it at apply, in a child process, and the value flows of
//! the children produced checked the same way; a compose failing on the sample is a 422 at
//! `/spec/sample_spec`, and a compose that cannot run here (no bundle, no
//! `converge-starlark-compose`) a `warnings` entry. Brokers push a changed default to every
//! stream serving the kind.
//!
//! Secrets: every value a `"writeOnly": true` subschema of the kind's `config_schema` covers
//! reads as `"***"` in every response here (one, list, and the write's echo), and no
//! validation message quotes one. Writing `"***"` at such a location keeps the value stored
//! under that name for that kind, so the UI's read-edit-save round trip keeps the secret.
//! Stored, each such value is sealed (`converge_engine::sealing`: an envelope under the
//! current key of `SECRETS_KEY_FILE` / `SECRETS_KEY_COMMAND`, bound to the kind and the
//! value's pointer); without a key, a writeOnly value other than `null` or `""` is a 400
//! naming the settings. A kept `"***"` is opened for the checks and sealed again. A spec
//! sent with an envelope in it is a 422: envelopes are converge's own. Only the brokers
//! open the envelopes, for the workers that serve the kind.
//!
//! Exec kinds: when the kind's manifest declares `"provider": "exec"`, a non-default config
//! (a resource's override) may not set `program`, `args`, `env` or `timeout_secs` (422 at
//! `/spec/<field>`): what runs is the default config's decision, never a resource's.

use axum::{
    Json,
    extract::{RawQuery, State},
    http::StatusCode,
    response::IntoResponse,
};
use base64::Engine;
use std::{collections::HashMap, sync::Arc};

use converge_proto::manifest::is_valid_resource_name;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{Conflict, NotFound};
use super::wire::{NamePath, ProviderConfig, ProviderConfigList, ProviderConfigQuery};
use super::{
    AppState,
    input::{ApiJson, ApiPath},
    problem::{ApiError, FieldError, field_errors, quote},
    query_pairs,
};
use crate::app::{
    flows,
    starlark_sample::{BundleSource, Runner, Sample},
};
use crate::db::{
    self,
    providerconfigs::{
        DeleteOutcome, ListFilter, ProviderConfigPut, ProviderConfigRow, PutRefused,
    },
};
use converge_engine::sealing;
use converge_kinds::{Kind, MASK, Violation};

/// The create-or-replace body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutBody {
    /// Global name: 1-253 printable ASCII characters, no `/` or space.
    #[schema(min_length = 1, max_length = 253, pattern = "^[!-.0-~]+$")]
    pub name: String,
    /// Kind configured.
    pub kind: String,
    /// Kind version configured (required, ≥ 1).
    #[serde(default)]
    #[schema(minimum = 1)]
    pub kind_version: i32,
    /// Whether this is the kind version's default.
    #[serde(default)]
    pub is_default: bool,
    /// Config spec (a JSON object), checked against the kind's `config_schema`.
    #[serde(default = "empty_object")]
    #[schema(value_type = std::collections::BTreeMap<String, serde_json::Value>)]
    pub spec: Value,
    /// Bundle, base64 (standard alphabet).
    #[serde(default)]
    pub data: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

/// Create or replace a provider config.
///
/// `POST /api/v1/providerconfigs` → 201 (created) or 200 (replaced) with the config (its
/// writeOnly values masked). 409 when a kept secret's config changed meanwhile.
#[utoipa::path(
    post, operation_id = "providerconfigs_put", path = "/providerconfigs", tag = "providerconfigs",
    request_body = PutBody,
    responses(
        (status = 201, description = "Created.", body = ProviderConfig),
        (status = 200, description = "Replaced.", body = ProviderConfig),
        (status = 409, response = Conflict),
    ),
)]
#[tracing::instrument(skip(s, body), fields(name = %body.name))]
pub async fn put(
    State(s): State<AppState>,
    ApiJson(mut body): ApiJson<PutBody>,
) -> Result<impl IntoResponse, ApiError> {
    if !is_valid_resource_name(&body.name) {
        return Err(ApiError::invalid(
            "/name",
            "name must be 1-253 printable ASCII characters without '/' or spaces",
        ));
    }
    if body.kind_version < 1 {
        return Err(ApiError::invalid(
            "/kind_version",
            "kind_version is required and must be at least 1",
        ));
    }
    if !body.spec.is_object() {
        return Err(ApiError::invalid("/spec", "spec must be a JSON object"));
    }
    if let Some((at, _)) = sealing::envelopes(&body.spec).first() {
        return Err(ApiError::invalid(
            &format!("/spec{at}"),
            format!(
                "an object with a {:?} key is converge's own envelope of a stored secret; send \
                 the plain value (or {MASK:?} to keep the stored one)",
                sealing::ENVELOPE_TAG
            ),
        ));
    }
    let Some(schemas) = s.kind(&body.kind, body.kind_version).await? else {
        return Err(ApiError::invalid(
            "/kind",
            format!(
                "kind {} version {} is not registered (apply its manifest first)",
                quote(&body.kind),
                body.kind_version
            ),
        ));
    };
    let mut errors = exec_override_errors(&s, &schemas, &body).await?;
    let kept_from = keep_stored_secrets(&s, &schemas, &mut body).await?;
    // Kept secrets came back sealed: every check below sees the plain config.
    if let Some(e) = s
        .secrets
        .open_config(&body.kind, &mut body.spec)
        .into_iter()
        .next()
    {
        return Err(ApiError::Conflict(format!(
            "provider config {:?} keeps a stored secret ({MASK:?}) that the configured keys \
             cannot read: at /spec{}: {}; send the value itself",
            body.name, e.pointer, e.reason
        )));
    }
    let violations = schemas.config_violations(&body.spec, "/spec");
    errors.extend(field_errors(violations.errors));
    ApiError::check_fields_omitted(
        &format!(
            "spec does not satisfy the config_schema of {} version {}",
            body.kind, body.kind_version
        ),
        errors,
        violations.omitted,
    )?;
    let mut warnings = check_cel_graph(&s, &schemas, &body.spec).await?;
    let data = match &body.data {
        None => None,
        Some(b64) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| ApiError::invalid("/data", format!("data is not base64: {e}")))?;
            if bytes.len() > s.max_bundle_bytes {
                return Err(ApiError::invalid(
                    "/data",
                    format!(
                        "data is {} bytes, over the {}-byte limit (MAX_BUNDLE_BYTES)",
                        bytes.len(),
                        s.max_bundle_bytes
                    ),
                ));
            }
            Some(bytes)
        }
    };
    warnings.extend(check_starlark_sample(&s, &schemas, &body, data.as_deref()).await?);
    // Stored sealed: no writeOnly value reaches the database in plain text.
    let mut sealed = body.spec.clone();
    schemas
        .seal_config(&s.secrets, &mut sealed)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let put = ProviderConfigPut {
        name: &body.name,
        kind: &body.kind,
        kind_version: body.kind_version,
        is_default: body.is_default,
        spec: &sealed,
        data: data.as_deref(),
        kept_from: kept_from.as_ref(),
    };
    let created = match db::providerconfigs::providerconfig_put(&s.pool, &put)
        .await
        .map_err(ApiError::db("store a provider config"))?
    {
        Ok(created) => created,
        Err(PutRefused::DefaultTaken(other)) => {
            return Err(ApiError::Conflict(format!(
                "{other:?} is already the default config of {} version {}; make it a non-default first",
                body.kind, body.kind_version
            )));
        }
        Err(PutRefused::Owned) => {
            return Err(ApiError::Conflict(format!(
                "provider config {:?} is managed by the composite that emitted it",
                body.name
            )));
        }
        Err(PutRefused::Changed) => {
            return Err(ApiError::Conflict(format!(
                "provider config {:?} changed while this write kept its stored secrets (\"***\"); \
                 read it again and retry",
                body.name
            )));
        }
    };
    let (mut row, _) = db::providerconfigs::providerconfig_get(&s.pool, &body.name)
        .await
        .map_err(ApiError::db("read a provider config"))?
        .ok_or_else(|| ApiError::NotFound(format!("provider config {} vanished", body.name)))?;
    Masker::new(&s).mask(&mut row).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let answer = ProviderConfig {
        warnings,
        ..ProviderConfig::from(row)
    };
    Ok((status, Json(answer)))
}

/// For an exec kind, a 422 entry at `/spec/<field>` for each field an override may not set,
/// when the config acts as an override: it is not the default, or resources name it in
/// `provider_config_ref` (a default so named rides their tasks as an override too).
async fn exec_override_errors(
    s: &AppState,
    schemas: &Kind,
    body: &PutBody,
) -> Result<Vec<FieldError>, ApiError> {
    let fields = schemas.exec_override_violations(&body.spec);
    if fields.is_empty() {
        return Ok(Vec::new());
    }
    let why = if !body.is_default {
        "a non-default config (a resource's override)".to_string()
    } else {
        let used_by = db::providerconfigs::providerconfig_get(&s.pool, &body.name)
            .await
            .map_err(ApiError::db("read a provider config"))?
            .map_or(0, |(row, _)| row.used_by);
        if used_by == 0 {
            return Ok(Vec::new());
        }
        format!("this config, named by {used_by} resource(s) in provider_config_ref (an override),")
    };
    Ok(fields
        .into_iter()
        .map(|f| {
            FieldError::new(
                format!("/spec/{f}"),
                format!(
                    "{} is an exec kind: {why} may set only settings; {f} is the default \
                     config's to set",
                    body.kind
                ),
            )
        })
        .collect())
}

/// Fills every `"***"` the body's spec carries at a writeOnly location from the spec stored
/// under its name (when that config configures the same kind), and returns that stored spec
/// when anything was kept, for the write to check it is still the one stored. A `"***"` with
/// nothing to keep is a 422 naming its location.
async fn keep_stored_secrets(
    s: &AppState,
    schemas: &Kind,
    body: &mut PutBody,
) -> Result<Option<Value>, ApiError> {
    // Nothing to keep (no "***" at a writeOnly location): no read.
    if schemas
        .restore_config(&mut body.spec.clone(), None, "/spec")
        .is_ok()
    {
        return Ok(None);
    }
    let stored = db::providerconfigs::providerconfig_get(&s.pool, &body.name)
        .await
        .map_err(ApiError::db("read a provider config"))?
        .map(|(row, _)| row)
        .filter(|row| row.kind == body.kind)
        .map(|row| row.spec);
    match schemas.restore_config(&mut body.spec, stored.as_ref(), "/spec") {
        Ok(0) => Ok(None),
        Ok(_) => Ok(stored),
        Err(errors) => {
            ApiError::check_fields(
                "spec keeps secrets that are not stored",
                field_errors(errors),
            )?;
            Ok(None)
        }
    }
}

/// Masks the writeOnly values of configs by their kind's config_schema, each (kind,
/// version) looked up once. A config whose kind version has no known manifest has no
/// declared secrets and is shown as stored, but for its sealed values (masked wherever).
struct Masker<'a> {
    s: &'a AppState,
    seen: HashMap<(String, i32), Option<Arc<Kind>>>,
}

impl<'a> Masker<'a> {
    fn new(s: &'a AppState) -> Self {
        Masker {
            s,
            seen: HashMap::new(),
        }
    }

    async fn mask(&mut self, row: &mut ProviderConfigRow) -> Result<(), ApiError> {
        let key = (row.kind.clone(), row.kind_version);
        let schemas = match self.seen.get(&key) {
            Some(k) => k.clone(),
            None => {
                let k = self.s.kind(&row.kind, row.kind_version).await?;
                self.seen.insert(key, k.clone());
                k
            }
        };
        match schemas {
            Some(k) => k.mask_config(&mut row.spec),
            // No declared secrets, but a sealed value still shows as masked.
            None => sealing::mask_envelopes(&mut row.spec, MASK),
        };
        Ok(())
    }
}

/// Compiles `spec` as a CEL resource graph when it has a top-level `resources` array, and
/// turns every compile error into a violation located under `/spec` (e.g.
/// `/spec/resources/1/template/spec/vpc_id`), its message withheld when it would show a
/// writeOnly value. A graph that compiles has its value flows checked against the kinds
/// they join ([`check_flows`]); the answer is the warnings for flows left unchecked. Other
/// specs pass untouched.
async fn check_cel_graph(
    s: &AppState,
    schemas: &Kind,
    spec: &Value,
) -> Result<Vec<String>, ApiError> {
    if !spec.get("resources").is_some_and(Value::is_array) {
        return Ok(Vec::new());
    }
    match converge_cel::Graph::compile(spec, converge_cel::Limits::default()) {
        Err(problems) => {
            let mut errors: Vec<Violation> = problems
                .iter()
                .map(|p| {
                    Violation::new(
                        format_args!("/spec{}", p.path),
                        format_args!("{:?}: {}", p.kind, p.message),
                    )
                })
                .collect();
            schemas.redact_config_violations(spec, "/spec", &mut errors);
            ApiError::check_fields(
                "spec is an invalid CEL resource graph",
                field_errors(errors),
            )?;
            Ok(Vec::new())
        }
        Ok(graph) => check_flows(s, schemas, spec, &flows::cel_flows(&graph), "/spec").await,
    }
}

/// The config spec key holding the sample spec a Starlark bundle is composed with at apply.
pub const SAMPLE_SPEC: &str = "sample_spec";

/// When `spec` declares a `sample_spec` (and the kind is not declared to be served by a
/// provider other than starlark), composes the config's Starlark `bundle` with it (in a
/// child process, [`Runner`]) and checks the value flows of the children it produced
/// ([`check_flows`]). A sample that is not an object or breaks the kind's `spec_schema`, a
/// bundle that does not load, and a compose that fails on the sample are 422s at
/// `/spec/sample_spec`. When the compose cannot run here (no bundle, no binary), the config
/// is accepted and the answer is a warning saying its flows were not checked, and why.
async fn check_starlark_sample(
    s: &AppState,
    schemas: &Kind,
    body: &PutBody,
    bundle: Option<&[u8]>,
) -> Result<Vec<String>, ApiError> {
    let Some(sample) = body.spec.get(SAMPLE_SPEC) else {
        return Ok(Vec::new());
    };
    if schemas
        .manifest
        .provider
        .as_deref()
        .is_some_and(|p| p != "starlark")
    {
        return Ok(Vec::new());
    }
    let at = format!("/spec/{SAMPLE_SPEC}");
    if !sample.is_object() {
        return Err(ApiError::invalid(
            &at,
            format!(
                "{SAMPLE_SPEC} must be a JSON object: a spec of kind {}",
                body.kind
            ),
        ));
    }
    let violations = schemas.spec_violations(sample, &at);
    ApiError::check_fields_omitted(
        &format!(
            "{SAMPLE_SPEC} does not satisfy the spec_schema of {} version {}",
            body.kind, body.kind_version
        ),
        field_errors(violations.errors),
        violations.omitted,
    )?;
    let Some(bundle) = bundle.filter(|b| !b.is_empty()) else {
        return Ok(not_checked("this config carries no bundle (data)"));
    };
    let runner = match Runner::find() {
        Ok(r) => r,
        Err(why) => return Ok(not_checked(&why)),
    };
    let root = json!({
        "name": "sample",
        "kind": body.kind,
        "kind_version": body.kind_version,
        "labels": {},
    });
    match runner
        .compose(BundleSource::Zip(bundle), sample, &body.spec, &root)
        .await
    {
        Sample::Composed(out) => {
            check_flows(s, schemas, &body.spec, &flows::compose_flows(&out), &at).await
        }
        Sample::Failed(why) => {
            let mut errors = vec![Violation::new(
                &at,
                format_args!("the starlark bundle's compose fails on {SAMPLE_SPEC}: {why}"),
            )];
            schemas.redact_config_violations(&body.spec, "/spec", &mut errors);
            ApiError::check_fields(
                "the starlark bundle does not compose its sample spec",
                field_errors(errors),
            )?;
            Ok(Vec::new())
        }
        Sample::NotRun(why) => Ok(not_checked(&why)),
    }
}

/// The warning of a sample compose that could not run.
fn not_checked(why: &str) -> Vec<String> {
    vec![format!(
        "the value flows of the starlark bundle were not checked against /spec/{SAMPLE_SPEC}: {why}"
    )]
}

/// Checks `found` (the value flows of a config's CEL graph or of its bundle's sample
/// compose, located under `prefix`) against the kinds they join, by the kind catalog
/// (`KindCatalog::check_flows`, the kinds read once): a 422 listing every flow that can never
/// type-check (a message withheld when it would show a writeOnly value of `spec`), else the
/// warnings for flows joining a kind not registered.
async fn check_flows(
    s: &AppState,
    schemas: &Kind,
    spec: &Value,
    found: &[converge_kinds::flows::Flow],
    prefix: &str,
) -> Result<Vec<String>, ApiError> {
    let (mut errors, warnings) = s
        .catalog
        .check_flows(&s.pool, found, prefix)
        .await
        .map_err(ApiError::db("look up kind manifests"))?;
    schemas.redact_config_violations(spec, "/spec", &mut errors);
    ApiError::check_fields(
        "spec's value flows cannot type-check against the kinds they join",
        field_errors(errors),
    )?;
    Ok(warnings)
}

/// Read a provider config.
///
/// `GET /api/v1/providerconfigs/{name}` → the config (writeOnly values masked), with its
/// bundle as base64 `data`.
#[utoipa::path(
    get, operation_id = "providerconfigs_get", path = "/providerconfigs/{name}", tag = "providerconfigs",
    params(NamePath),
    responses((status = 200, description = "The config with its bundle.", body = ProviderConfig), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn get(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ProviderConfig>, ApiError> {
    let (mut row, data) = db::providerconfigs::providerconfig_get(&s.pool, &name)
        .await
        .map_err(ApiError::db("read a provider config"))?
        .ok_or_else(|| ApiError::NotFound(format!("provider config {name} not found")))?;
    Masker::new(&s).mask(&mut row).await?;
    Ok(Json(ProviderConfig {
        data: Some(data.map(|d| base64::engine::general_purpose::STANDARD.encode(d))),
        ..ProviderConfig::from(row)
    }))
}

/// Default and largest page sizes.
const PAGE: i64 = 50;
const MAX_PAGE: i64 = 500;

/// List provider configs.
///
/// `GET /api/v1/providerconfigs?kind=&name=&default=&offset=&limit=` →
/// `{items, total, offset, limit}` ordered by name (writeOnly values masked; bundles are not
/// included).
#[utoipa::path(
    get, operation_id = "providerconfigs_list", path = "/providerconfigs", tag = "providerconfigs",
    params(ProviderConfigQuery),
    responses((status = 200, description = "One page, by name.", body = ProviderConfigList)),
)]
#[tracing::instrument(skip(s))]
pub async fn list(
    State(s): State<AppState>,
    RawQuery(q): RawQuery,
) -> Result<Json<ProviderConfigList>, ApiError> {
    let mut f = ListFilter {
        limit: PAGE,
        ..Default::default()
    };
    for (k, v) in query_pairs(q.as_deref()) {
        let bad = |what: &str| ApiError::BadRequest(format!("{}={}: {what}", quote(&k), quote(&v)));
        match k.as_str() {
            "kind" => f.kind = Some(v),
            "name" => f.name = Some(v),
            "default" => {
                f.is_default = Some(v.parse().map_err(|_| bad("expected true or false"))?);
            }
            "offset" => {
                f.offset = v
                    .parse()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| bad("expected a non-negative integer"))?;
            }
            "limit" => {
                f.limit = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE).contains(n))
                    .ok_or_else(|| bad(&format!("expected 1..={MAX_PAGE}")))?;
            }
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {}",
                    quote(&k)
                )));
            }
        }
    }
    let (mut items, total) = db::providerconfigs::providerconfig_list(&s.pool, &f)
        .await
        .map_err(ApiError::db("list provider configs"))?;
    let mut masker = Masker::new(&s);
    for row in &mut items {
        masker.mask(row).await?;
    }
    Ok(Json(ProviderConfigList {
        items: items.into_iter().map(ProviderConfig::from).collect(),
        total,
        offset: f.offset,
        limit: f.limit,
    }))
}

/// Delete a provider config.
///
/// `DELETE /api/v1/providerconfigs/{name}` → 204. 409 while resources reference it or when a
/// composite owns it.
#[utoipa::path(
    delete, operation_id = "providerconfigs_delete", path = "/providerconfigs/{name}", tag = "providerconfigs",
    params(NamePath),
    responses((status = 204, description = "Deleted."), (status = 404, response = NotFound), (status = 409, response = Conflict)),
)]
#[tracing::instrument(skip(s))]
pub async fn delete(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    match db::providerconfigs::providerconfig_delete(&s.pool, &name)
        .await
        .map_err(ApiError::db("delete a provider config"))?
    {
        DeleteOutcome::Deleted => Ok(StatusCode::NO_CONTENT),
        DeleteOutcome::NotFound => Err(ApiError::NotFound(format!(
            "provider config {name} not found"
        ))),
        DeleteOutcome::Owned => Err(ApiError::Conflict(format!(
            "provider config {name} is managed by the composite that emitted it"
        ))),
        DeleteOutcome::InUse(n) => Err(ApiError::Conflict(format!(
            "provider config {name} is referenced by {n} resource(s); detach them first"
        ))),
    }
}
