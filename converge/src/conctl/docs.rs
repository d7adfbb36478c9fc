//! Reading apply input: JSON or YAML files (or stdin), one or several documents each, and
//! telling resources from manifests.

use std::io::Read;

use anyhow::{Context, bail};
use clap::ValueEnum;
use serde::Deserialize;
use serde_json::Value;

/// What a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DocType {
    /// A resource (`POST /api/v1/resources`).
    #[value(aliases = ["resources", "res"])]
    Resource,
    /// A kind manifest (`PUT /api/v1/kinds/{kind}/manifest`).
    #[value(aliases = ["manifests", "kind", "kinds", "crd"])]
    Manifest,
}

impl DocType {
    fn name(self) -> &'static str {
        match self {
            DocType::Resource => "resource",
            DocType::Manifest => "manifest",
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
    /// The body.
    pub body: Value,
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

/// Decides a document's type: `--type`, else its top-level `type`, else a manifest when it
/// declares `reactions`, else a resource. A `type` that contradicts `--type` is an error.
pub fn classify(v: &Value, forced: Option<DocType>) -> anyhow::Result<DocType> {
    if !v.is_object() {
        bail!("a document must be a mapping (JSON object)");
    }
    let declared =
        match v.get("type") {
            None | Some(Value::Null) => None,
            Some(Value::String(t)) => Some(DocType::from_str(t, true).map_err(|_| {
                anyhow::anyhow!("type {t:?} is not supported (resource or manifest)")
            })?),
            Some(other) => bail!("type must be a string, got {other}"),
        };
    match (forced, declared) {
        (Some(f), Some(d)) if f != d => {
            bail!(
                "the document says type {:?} but --type is {:?}",
                d.name(),
                f.name()
            )
        }
        (Some(t), _) | (None, Some(t)) => Ok(t),
        (None, None) if v.get("reactions").is_some() => Ok(DocType::Manifest),
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

/// Reads every `-f` argument (a directory: its files, see [`walk`]) (`-` = stdin) into typed documents, manifests first (a file may
/// hold a kind and resources of it), keeping file order otherwise.
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
        for (i, v) in values.into_iter().enumerate() {
            let origin = if many {
                format!("{label}#{}", i + 1)
            } else {
                label.clone()
            };
            let doc_type = classify(&v, forced).with_context(|| origin.clone())?;
            docs.push(Doc {
                origin,
                doc_type,
                body: v,
            });
        }
    }
    docs.sort_by_key(|d| d.doc_type != DocType::Manifest);
    Ok(docs)
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
        assert!(classify(&json!({"type": "providerconfig"}), None).is_err());
        assert!(classify(&json!([1]), None).is_err());
    }
}
