//! `conctl apply` and `conctl sync`: the GitOps path. `apply -f FILE|DIR` sends every
//! document to its endpoint in dependency order — kind manifests, provider configs, reactor
//! bindings, then resources in batches — after refusing two documents that name the same
//! object ([`docs::load`]). `sync` applies the same way and then prunes: it deletes the
//! roots that carry every `-l` label and are no longer in the files; `--plan` prints what
//! it would apply and delete and changes nothing.

use std::collections::HashSet;

use anyhow::bail;
use converge_engine::words::Phase;
use futures::{StreamExt, stream};
use hyper::{Method, StatusCode};
use serde_json::{Value, json};

use crate::client::{ApiProblem, Client, enc, is_not_found};
use crate::docs::{self, Doc, DocType};
use crate::output::{self, Format, outln};

/// Resources sent in one `POST /api/v1/resources:batch` (the server takes up to 10,000; a
/// smaller batch keeps each request's body and its answer small).
const APPLY_BATCH: usize = 1_000;
/// Resources read at once by `sync --plan` to compare with the files.
const PLAN_READS: usize = 8;
/// The most roots one sync considers for pruning.
const PRUNE_SCAN: usize = 100_000;

/// A label selector: every pair must be on a resource.
pub type Labels = Vec<(String, String)>;

/// Parses `KEY=VALUE` (or `KEY:VALUE`, the API's own spelling) into a pair. The first `=`
/// splits when there is one, else the first `:`.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    let split = s.split_once('=').or_else(|| s.split_once(':'));
    match split {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not a label KEY=VALUE")),
    }
}

/// The label pairs as the API's `label=key:value` query parameters.
pub fn label_query(labels: &[(String, String)]) -> Vec<(&'static str, String)> {
    labels
        .iter()
        .map(|(k, v)| ("label", format!("{k}:{v}")))
        .collect()
}

/// `apply -f ...`: loads the documents and applies them all; `Ok(false)` when any was
/// refused (each refusal printed; the others still applied).
pub async fn apply(
    c: &Client,
    files: &[String],
    forced: Option<DocType>,
    format: Format,
) -> anyhow::Result<bool> {
    let docs = docs::load(files, forced)?;
    output::finish_work_when_stdout_closes();
    let (ok, bodies) = apply_docs(c, &docs, format).await?;
    if format != Format::Table {
        output::document(&Value::Array(bodies), format)?;
    }
    Ok(ok)
}

/// Applies `docs` (already in dependency order): one line per document for a table, else
/// the answers for the caller to print. Stops only on a 401 (every other document would be
/// refused the same way).
async fn apply_docs(
    c: &Client,
    docs: &[Doc],
    format: Format,
) -> anyhow::Result<(bool, Vec<Value>)> {
    let mut ok = true;
    let mut bodies = Vec::new();
    let (resources, others): (Vec<&Doc>, Vec<&Doc>) =
        docs.iter().partition(|d| d.doc_type == DocType::Resource);
    for d in others {
        let label = d.label();
        let (method, path) = match d.doc_type {
            DocType::Manifest => {
                let kind = d.body["kind"].as_str().unwrap_or_default();
                if kind.is_empty() {
                    eprintln!("error: {}: a manifest needs a kind", d.origin);
                    ok = false;
                    continue;
                }
                (Method::PUT, format!("/kinds/{}/manifest", enc(kind)))
            }
            DocType::ProviderConfig => (Method::POST, "/providerconfigs".to_string()),
            DocType::ReactorBinding => (Method::POST, "/reactor-bindings".to_string()),
            DocType::Resource => unreachable!("partitioned out"),
        };
        match c.call(method, &path, Some(&d.body)).await {
            Ok(r) => {
                // Flows left unchecked (a kind not registered yet), a bundle not composed.
                for w in r.body["warnings"].as_array().into_iter().flatten() {
                    eprintln!("warning: {label}: {}", w.as_str().unwrap_or_default());
                }
                let result = match r.header("x-apply-result") {
                    word if !word.is_empty() => word,
                    _ if r.status == StatusCode::CREATED => "created".into(),
                    _ => "configured".into(),
                };
                if format == Format::Table {
                    outln!("{label}: {result}");
                } else {
                    bodies.push(r.body);
                }
            }
            Err(e) => ok &= refused(&label, e)?,
        }
    }
    // Resources go in batches: one request per APPLY_BATCH documents, one answer per item.
    for chunk in resources.chunks(APPLY_BATCH) {
        let labels: Vec<String> = chunk.iter().map(|d| d.label()).collect();
        let batch = Value::Array(chunk.iter().map(|d| d.body.clone()).collect());
        let reply = match c.call(Method::POST, "/resources:batch", Some(&batch)).await {
            Ok(r) => r,
            Err(e) => {
                let what = format!("{} resources from {}", chunk.len(), labels[0]);
                ok &= refused(&what, e)?;
                continue;
            }
        };
        for (i, label) in labels.iter().enumerate() {
            let mut item = reply.body["results"][i].clone();
            let status = item["status"].as_u64().unwrap_or(0);
            if item.is_null() {
                // Past the reply's 4 MiB (not with APPLY_BATCH items, whose results fit).
                eprintln!("error: {label}: the reply lists no result for it (results_omitted)");
                ok = false;
            } else if !(200..300).contains(&status) {
                let status = StatusCode::from_u16(u16::try_from(status).unwrap_or(500))
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let problem = ApiProblem::from_body(status, &item["error"].to_string());
                eprintln!("error: {label}: {problem}");
                ok = false;
            } else if format == Format::Table {
                outln!("{label}: {}", item["result"].as_str().unwrap_or_default());
            } else if let Some(o) = item.as_object_mut() {
                o.remove("index");
                o.remove("status");
                bodies.push(item);
            }
        }
    }
    Ok((ok, bodies))
}

/// Reports a refused document (`Ok(false)`: the others go on, the exit code says so), or
/// stops the whole apply on a 401: without a usable token every other document would be
/// refused the same way.
fn refused(label: &str, e: anyhow::Error) -> anyhow::Result<bool> {
    if e.downcast_ref::<ApiProblem>()
        .is_some_and(|p| p.status == StatusCode::UNAUTHORIZED)
    {
        return Err(e);
    }
    eprintln!("error: {label}: {e:#}");
    Ok(false)
}

/// What `sync` is asked to do.
pub struct SyncArgs {
    /// `-f` arguments.
    pub files: Vec<String>,
    /// `--type`.
    pub forced: Option<DocType>,
    /// `--prune`.
    pub prune: bool,
    /// `-l` pairs: the resources this directory manages.
    pub labels: Labels,
    /// `--plan`: print, change nothing.
    pub plan: bool,
}

/// `sync -f DIR [--prune -l KEY=VALUE...] [--plan]`: applies the files, then (with
/// `--prune`) deletes every root carrying all the labels whose kind/name no file defines.
/// Children are never pruned here: they belong to their composer. Nothing is pruned when
/// any document was refused, so a typo cannot turn into a deletion.
pub async fn sync(c: &Client, a: &SyncArgs, format: Format) -> anyhow::Result<bool> {
    if a.prune && a.labels.is_empty() {
        bail!(
            "--prune deletes the resources that carry the -l labels and are not in the files: \
             give at least one -l KEY=VALUE (without one it would consider every resource)"
        );
    }
    let docs = docs::load(&a.files, a.forced)?;
    let defined: HashSet<(String, String)> = docs
        .iter()
        .filter(|d| d.doc_type == DocType::Resource)
        .map(|d| {
            let s = |k: &str| d.body[k].as_str().unwrap_or_default().to_string();
            (s("kind"), s("name"))
        })
        .collect();
    if a.prune {
        for d in docs.iter().filter(|d| d.doc_type == DocType::Resource) {
            let carries = a
                .labels
                .iter()
                .all(|(k, v)| d.body["labels"][k].as_str() == Some(v.as_str()));
            if !carries {
                eprintln!(
                    "warning: {} ({}) lacks the -l labels: once removed from the files it \
                     will not be pruned",
                    d.label(),
                    d.origin
                );
            }
        }
    }
    if a.plan {
        return plan(c, a, &docs, &defined, format).await;
    }
    output::finish_work_when_stdout_closes();
    let (ok, mut bodies) = apply_docs(c, &docs, format).await?;
    if a.prune && !ok {
        eprintln!("not pruning: some documents were refused (fix them and sync again)");
    } else if a.prune {
        for (kind, name) in prune_set(c, &a.labels, &defined).await? {
            let label = format!("{kind}/{name}");
            let path = format!("/resources/{}/{}", enc(&kind), enc(&name));
            match c.call(Method::DELETE, &path, None).await {
                Ok(_) => {
                    if format == Format::Table {
                        outln!("{label}: pruned (deletion requested)");
                    } else {
                        bodies.push(json!({"kind": kind, "name": name, "result": "pruned"}));
                    }
                }
                // Gone meanwhile: what the prune wanted.
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    eprintln!("error: pruning {label}: {e:#}");
                    return Ok(false);
                }
            }
        }
    }
    if format != Format::Table {
        output::document(&Value::Array(bodies), format)?;
    }
    Ok(ok)
}

/// The roots carrying every label, not being deleted already, that no file defines.
async fn prune_set(
    c: &Client,
    labels: &[(String, String)],
    defined: &HashSet<(String, String)>,
) -> anyhow::Result<Vec<(String, String)>> {
    let roots = c
        .pages(
            "/resources/roots",
            "roots",
            &label_query(labels),
            PRUNE_SCAN,
        )
        .await?;
    Ok(roots
        .iter()
        .filter(|r| r["phase"] != Phase::Deleting.as_str())
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (s("kind"), s("name"))
        })
        .filter(|key| !defined.contains(key))
        .collect())
}

/// What applying one resource document would do, from the stored resource: `create` when
/// there is none, `unchanged` when its kind version, labels, spec and provider config are
/// the document's, `configure` otherwise.
fn resource_action(doc: &Value, stored: Option<&Value>) -> &'static str {
    let Some(r) = stored else { return "create" };
    let or = |v: &Value, empty: Value| if v.is_null() { empty } else { v.clone() };
    let same = doc["kind_version"] == r["kind_version"]
        && or(&doc["labels"], json!({})) == r["labels"]
        && or(&doc["spec"], json!({})) == r["spec"]
        && doc["provider_config_ref"] == r["provider_config_ref"];
    if same { "unchanged" } else { "configure" }
}

/// `sync --plan`: every document with what applying it would do (resources compared with
/// what is stored; other documents `apply`), and the roots a prune would delete.
async fn plan(
    c: &Client,
    a: &SyncArgs,
    docs: &[Doc],
    defined: &HashSet<(String, String)>,
    format: Format,
) -> anyhow::Result<bool> {
    let actions: Vec<anyhow::Result<&'static str>> = stream::iter(docs)
        .map(|d| async move {
            if d.doc_type != DocType::Resource {
                return Ok("apply");
            }
            let s = |k: &str| d.body[k].as_str().unwrap_or_default();
            let path = format!("/resources/{}/{}", enc(s("kind")), enc(s("name")));
            match c.call(Method::GET, &path, None).await {
                Ok(r) => Ok(resource_action(&d.body, Some(&r.body))),
                Err(e) if is_not_found(&e) => Ok(resource_action(&d.body, None)),
                Err(e) => Err(e),
            }
        })
        .buffered(PLAN_READS)
        .collect()
        .await;
    let mut applies = Vec::new();
    for (d, action) in docs.iter().zip(actions) {
        applies.push((d, action?));
    }
    let deletes = if a.prune {
        prune_set(c, &a.labels, defined).await?
    } else {
        Vec::new()
    };
    if format != Format::Table {
        let answer = json!({
            "apply": applies.iter().map(|(d, action)| json!({
                "type": d.doc_type.name(), "object": d.label(), "origin": d.origin,
                "action": action,
            })).collect::<Vec<_>>(),
            "delete": deletes.iter().map(|(kind, name)| json!({"kind": kind, "name": name}))
                .collect::<Vec<_>>(),
        });
        output::document(&answer, format)?;
        return Ok(true);
    }
    let count = |what: &str| applies.iter().filter(|(_, x)| *x == what).count();
    for (d, action) in &applies {
        outln!("{}: {action}", d.label());
    }
    for (kind, name) in &deletes {
        outln!("{kind}/{name}: delete");
    }
    outln!(
        "plan: {} to create, {} to configure, {} unchanged, {} other documents to apply, {} to \
         delete (nothing was changed)",
        count("create"),
        count("configure"),
        count("unchanged"),
        count("apply"),
        deletes.len()
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse_with_equals_or_colon() {
        assert_eq!(parse_label("app=web"), Ok(("app".into(), "web".into())));
        assert_eq!(parse_label("app:web"), Ok(("app".into(), "web".into())));
        assert_eq!(parse_label("a=b:c"), Ok(("a".into(), "b:c".into())));
        assert_eq!(parse_label("a="), Ok(("a".into(), String::new())));
        assert!(parse_label("=x").is_err());
        assert!(parse_label("bare").is_err());
        assert_eq!(
            label_query(&[("app".into(), "web".into())]),
            [("label", "app:web".to_string())]
        );
    }

    #[test]
    fn a_plan_compares_what_an_apply_would_change() {
        let doc = json!({"kind": "k", "kind_version": 1, "name": "n", "spec": {"a": 1}});
        assert_eq!(resource_action(&doc, None), "create");
        let stored = json!({"kind": "k", "kind_version": 1, "name": "n", "spec": {"a": 1},
                            "labels": {}, "provider_config_ref": null, "phase": "Ready"});
        assert_eq!(resource_action(&doc, Some(&stored)), "unchanged");
        let mut edited = doc.clone();
        edited["spec"]["a"] = 2.into();
        assert_eq!(resource_action(&edited, Some(&stored)), "configure");
        let mut labelled = doc.clone();
        labelled["labels"] = json!({"team": "a"});
        assert_eq!(resource_action(&labelled, Some(&stored)), "configure");
    }
}
