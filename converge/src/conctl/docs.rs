//! Reading apply input: JSON or YAML files (or stdin), one or several documents each; telling
//! the four document types apart (resource, kind manifest, provider config, reactor binding);
//! refusing two documents that name the same object; and putting them in dependency order.

use std::{collections::HashMap, io::Read};

use anyhow::{Context, bail};
use clap::ValueEnum;
use serde::Deserialize;
use serde_json::Value;

/// What a document is. The order of the variants is the order they are applied in: a kind
/// before the configs and bindings that name it, and all of them before resources (which
/// may name a provider config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum DocType {
    /// A kind manifest (`PUT /api/v1/kinds/{kind}/manifest`).
    #[value(aliases = ["manifests", "kind", "kinds", "crd"])]
    Manifest,
    /// A provider config (`POST /api/v1/providerconfigs`).
    #[value(
        name = "providerconfig",
        aliases = ["providerconfigs", "provider-config", "config", "pc"]
    )]
    ProviderConfig,
    /// A reactor binding (`POST /api/v1/reactor-bindings`).
    #[value(
        name = "reactor-binding",
        aliases = ["reactor-bindings", "reactorbinding", "binding", "bindings"]
    )]
    ReactorBinding,
    /// A resource (`POST /api/v1/resources:batch`).
    #[value(aliases = ["resources", "res"])]
    Resource,
}

impl DocType {
    /// The type's name, as `--type` and the `type` field spell it.
    pub fn name(self) -> &'static str {
        match self {
            DocType::Resource => "resource",
            DocType::Manifest => "manifest",
            DocType::ProviderConfig => "providerconfig",
            DocType::ReactorBinding => "reactor-binding",
        }
    }
}

/// One document to apply.
#[derive(Debug, Clone)]
pub struct Doc {
    /// Where it came from (`file.yaml#2`), for messages.
    pub origin: String,
    /// Its type.
    pub doc_type: DocType,
    /// The body, without the `type` field (conctl's own: the provider-config and binding
    /// endpoints refuse fields they do not know).
    pub body: Value,
}

impl Doc {
    /// The object the document names, as its messages show it: `kind/name` for a resource,
    /// `manifest/kind` (`manifest/kind@v2` past version 1), `providerconfig/name`,
    /// `reactor-binding/name`; the origin when the naming fields are missing (the server
    /// refuses such a document and says why).
    pub fn label(&self) -> String {
        let s = |k: &str| self.body[k].as_str().unwrap_or_default();
        match self.doc_type {
            DocType::Resource if !s("kind").is_empty() && !s("name").is_empty() => {
                format!("{}/{}", s("kind"), s("name"))
            }
            DocType::Manifest if !s("kind").is_empty() => {
                match self.body["kind_version"].as_i64() {
                    Some(v) if v != 1 => format!("manifest/{}@v{v}", s("kind")),
                    _ => format!("manifest/{}", s("kind")),
                }
            }
            DocType::ProviderConfig | DocType::ReactorBinding if !s("name").is_empty() => {
                format!("{}/{}", self.doc_type.name(), s("name"))
            }
            _ => self.origin.clone(),
        }
    }

    /// The object's identity: two documents with the same one would overwrite each other
    /// (`None` when the document lacks its naming fields).
    fn identity(&self) -> Option<(DocType, String, String)> {
        let s = |k: &str| self.body[k].as_str().filter(|v| !v.is_empty());
        let t = self.doc_type;
        match t {
            DocType::Resource => Some((t, s("kind")?.to_string(), s("name")?.to_string())),
            DocType::Manifest => {
                let version = self.body["kind_version"].to_string();
                Some((t, s("kind")?.to_string(), version))
            }
            DocType::ProviderConfig | DocType::ReactorBinding => {
                Some((t, String::new(), s("name")?.to_string()))
            }
        }
    }
}

/// Parses a file's text: JSON (an object, or an array of objects) or YAML (one or more
/// `---`-separated documents; empty documents are skipped).
pub fn parse(text: &str) -> anyhow::Result<Vec<Value>> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let v: Value = serde_json::from_str(text).context("invalid JSON")?;
        return Ok(match v {
            Value::Array(items) => items,
            one => vec![one],
        });
    }
    let mut docs = Vec::new();
    for (i, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let v = Value::deserialize(de)
            .with_context(|| format!("invalid YAML in document {}", i + 1))?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}

/// Decides a document's type: `--type`, else its top-level `type`, else its shape — a
/// manifest declares `reactions`; a binding has `watch_kind`, `reactor` or `transition`; a
/// provider config has `is_default` or `data`; anything else is a resource. A `type` that
/// contradicts `--type` is an error.
pub fn classify(v: &Value, forced: Option<DocType>) -> anyhow::Result<DocType> {
    if !v.is_object() {
        bail!("a document must be a mapping (JSON object)");
    }
    let declared = match v.get("type") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(DocType::from_str(t, true).map_err(|_| {
            anyhow::anyhow!(
                "type {t:?} is not supported (resource, manifest, providerconfig or \
                 reactor-binding)"
            )
        })?),
        Some(other) => bail!("type must be a string, got {other}"),
    };
    let has = |k: &str| v.get(k).is_some();
    match (forced, declared) {
        (Some(f), Some(d)) if f != d => {
            bail!(
                "the document says type {:?} but --type is {:?}",
                d.name(),
                f.name()
            )
        }
        (Some(t), _) | (None, Some(t)) => Ok(t),
        (None, None) if has("reactions") => Ok(DocType::Manifest),
        (None, None) if has("watch_kind") || has("reactor") || has("transition") => {
            Ok(DocType::ReactorBinding)
        }
        (None, None) if has("is_default") || has("data") => Ok(DocType::ProviderConfig),
        (None, None) => Ok(DocType::Resource),
    }
}

/// Adds every .json, .yaml and .yml file under `dir` to `out`, in path order (hidden
/// entries skipped).
fn walk(dir: &std::path::Path, out: &mut Vec<String>) -> anyhow::Result<()> {
    let mut entries: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    entries.sort();
    for path in entries {
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden {
            continue;
        }
        if path.is_dir() {
            walk(&path, out)?;
        } else if path
            .extension()
            .is_some_and(|x| x == "json" || x == "yaml" || x == "yml")
        {
            out.push(path.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

/// Reads every `-f` argument (a directory: its files, see [`walk`]; `-` = stdin) into typed
/// documents, refuses two documents naming the same object ([`refuse_duplicates`]), and
/// orders them for applying: manifests, provider configs, reactor bindings, resources
/// ([`DocType`]'s order), file order within each type.
pub fn load(files: &[String], forced: Option<DocType>) -> anyhow::Result<Vec<Doc>> {
    let mut docs = Vec::new();
    let mut expanded = Vec::new();
    for f in files {
        if f != "-" && std::path::Path::new(f).is_dir() {
            let before = expanded.len();
            walk(std::path::Path::new(f), &mut expanded)?;
            if expanded.len() == before {
                bail!("{f} holds no .json, .yaml or .yml file");
            }
        } else {
            expanded.push(f.clone());
        }
    }
    for f in &expanded {
        let (label, text) = if f == "-" {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading stdin")?;
            ("<stdin>".to_string(), s)
        } else {
            let s = std::fs::read_to_string(f).with_context(|| format!("reading {f}"))?;
            (f.clone(), s)
        };
        let values = parse(&text).with_context(|| format!("parsing {label}"))?;
        let many = values.len() > 1;
        for (i, mut v) in values.into_iter().enumerate() {
            let origin = if many {
                format!("{label}#{}", i + 1)
            } else {
                label.clone()
            };
            let doc_type = classify(&v, forced).with_context(|| origin.clone())?;
            if let Some(o) = v.as_object_mut() {
                o.remove("type");
            }
            docs.push(Doc {
                origin,
                doc_type,
                body: v,
            });
        }
    }
    refuse_duplicates(&docs)?;
    docs.sort_by_key(|d| d.doc_type);
    Ok(docs)
}

/// Fails, naming both places, for every object two documents define: applying both would
/// leave whichever came last, silently (e.g. the same resource as `bom.json` and
/// `bom.yaml`).
pub fn refuse_duplicates(docs: &[Doc]) -> anyhow::Result<()> {
    let mut first: HashMap<(DocType, String, String), &Doc> = HashMap::new();
    let mut clashes = Vec::new();
    for d in docs {
        let Some(id) = d.identity() else { continue };
        match first.get(&id) {
            Some(earlier) => clashes.push(format!(
                "{} and {} both define {}",
                earlier.origin,
                d.origin,
                d.label()
            )),
            None => {
                first.insert(id, d);
            }
        }
    }
    if !clashes.is_empty() {
        bail!(
            "{}; keep one of each (nothing was applied)",
            clashes.join("; ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn yaml_streams_and_json_arrays_give_several_documents() {
        let docs = parse("kind: a\nname: x\n---\nkind: b\n---\n").unwrap();
        assert_eq!(
            docs,
            vec![json!({"kind": "a", "name": "x"}), json!({"kind": "b"})]
        );
        let docs = parse(r#"[{"kind": "a"}, {"kind": "b"}]"#).unwrap();
        assert_eq!(docs.len(), 2);
        assert!(parse("{not json").is_err());
    }

    #[test]
    fn types_come_from_the_flag_the_field_or_the_shape() {
        let m = json!({"kind": "k", "reactions": []});
        let r = json!({"kind": "k", "name": "n"});
        assert_eq!(classify(&m, None).unwrap(), DocType::Manifest);
        assert_eq!(classify(&r, None).unwrap(), DocType::Resource);
        assert_eq!(
            classify(&r, Some(DocType::Manifest)).unwrap(),
            DocType::Manifest
        );
        let typed = json!({"type": "resource", "kind": "k", "reactions": []});
        assert_eq!(classify(&typed, None).unwrap(), DocType::Resource);
        assert!(classify(&typed, Some(DocType::Manifest)).is_err());
        assert!(classify(&json!({"type": "secret"}), None).is_err());
        assert!(classify(&json!([1]), None).is_err());

        let binding = json!({"name": "b", "watch_kind": "k", "transition": "synced",
                             "reactor": "sink", "enabled": true});
        assert_eq!(classify(&binding, None).unwrap(), DocType::ReactorBinding);
        let config = json!({"name": "c", "kind": "k", "kind_version": 1, "is_default": true,
                            "spec": {}});
        assert_eq!(classify(&config, None).unwrap(), DocType::ProviderConfig);
        let bundle = json!({"name": "c", "kind": "k", "kind_version": 1, "data": "AA=="});
        assert_eq!(classify(&bundle, None).unwrap(), DocType::ProviderConfig);
        // A non-default config without a bundle looks like a resource: its type says.
        for (t, want) in [
            ("providerconfig", DocType::ProviderConfig),
            ("ProviderConfig", DocType::ProviderConfig),
            ("reactor-binding", DocType::ReactorBinding),
            ("binding", DocType::ReactorBinding),
        ] {
            let v = json!({"type": t, "name": "c", "kind": "k", "spec": {}});
            assert_eq!(classify(&v, None).unwrap(), want, "{t}");
        }
    }

    fn doc(origin: &str, body: Value) -> Doc {
        Doc {
            origin: origin.into(),
            doc_type: classify(&body, None).unwrap(),
            body,
        }
    }

    #[test]
    fn two_documents_naming_one_object_are_refused_naming_both() {
        let docs = [
            doc("a.json", json!({"kind": "k", "name": "n", "spec": {}})),
            doc(
                "b.yaml#2",
                json!({"kind": "k", "name": "n", "spec": {"x": 1}}),
            ),
            // Same name, other types or kinds: no clash.
            doc("c.json", json!({"kind": "j", "name": "n"})),
            doc(
                "d.json",
                json!({"name": "n", "watch_kind": "k", "reactor": "r"}),
            ),
            doc(
                "e.json",
                json!({"name": "n", "kind": "k", "is_default": true}),
            ),
            doc(
                "f.json",
                json!({"kind": "k", "kind_version": 1, "reactions": []}),
            ),
            doc(
                "g.json",
                json!({"kind": "k", "kind_version": 2, "reactions": []}),
            ),
            doc(
                "h.json",
                json!({"kind": "k", "kind_version": 1, "reactions": []}),
            ),
        ];
        let e = refuse_duplicates(&docs).unwrap_err().to_string();
        assert_eq!(
            e,
            "a.json and b.yaml#2 both define k/n; f.json and h.json both define \
             manifest/k; keep one of each (nothing was applied)"
        );
        assert!(refuse_duplicates(&docs[2..7]).is_ok());
    }

    #[test]
    fn documents_are_applied_kinds_first_then_configs_bindings_and_resources() {
        let mut docs = [
            doc("r", json!({"kind": "k", "name": "n"})),
            doc("b", json!({"name": "n", "watch_kind": "k", "reactor": "r"})),
            doc("c", json!({"name": "n", "kind": "k", "is_default": true})),
            doc("m", json!({"kind": "k", "reactions": []})),
            doc("r2", json!({"kind": "k", "name": "m"})),
        ];
        docs.sort_by_key(|d| d.doc_type);
        let order: Vec<&str> = docs.iter().map(|d| d.origin.as_str()).collect();
        assert_eq!(order, ["m", "c", "b", "r", "r2"]);
    }
}
