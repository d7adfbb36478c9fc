//! `conctl`: the command-line client of the converge HTTP API — apply JSON/YAML files, get
//! (or watch), list, delete, wait for a phase, the operator actions (reconcile, quarantine,
//! unquarantine), and who is here (cluster).

mod client;
mod cluster;
mod docs;
mod output;
mod transport;
mod watch;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::bail;
use clap::{Parser, Subcommand, ValueEnum};
use hyper::{Method, StatusCode};
use serde_json::Value;

use client::{ApiProblem, Client, Token, enc, query};
use docs::DocType;
use output::{Format, age, cell, table};

#[derive(Parser)]
#[command(
    name = "conctl",
    version,
    about = "Command-line client for the converge API"
)]
struct Cli {
    /// The converge HTTP API: `http://host:port`, `https://host:port`, or a bare host:port
    /// (plain HTTP).
    #[arg(
        long,
        global = true,
        env = "CONVERGE_SERVER",
        default_value = "http://localhost:8080"
    )]
    server: String,
    /// Output format.
    #[arg(
        short = 'o',
        long = "output",
        global = true,
        value_enum,
        default_value = "table"
    )]
    output: Format,
    /// Per-request timeout (`500ms`, `30s`, `2m`, or seconds); for `wait`, how long to wait
    /// in all.
    #[arg(long, global = true, default_value = "30s", value_parser = parse_duration)]
    timeout: Duration,
    /// Bearer token for a converge that requires one (from `converge token new`). Prefer the
    /// environment variable: a command-line argument is visible to other users of the host.
    #[arg(
        long,
        global = true,
        env = "CONVERGE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    token: Option<String>,
    /// PEM file of the CA certificate(s) to trust for an https:// server (only these; without
    /// it, the webpki roots).
    #[arg(long, global = true, env = "CONVERGE_CA_FILE", value_name = "PEM")]
    ca_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

/// What `get`, `list` and `delete` act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Object {
    /// Resources, addressed as KIND/NAME.
    #[value(aliases = ["resources", "res"])]
    Resource,
    /// Kind manifests, addressed by kind.
    #[value(aliases = ["manifests", "kind", "kinds", "crd"])]
    Manifest,
}

#[derive(Subcommand)]
enum Command {
    /// Create or update resources and kind manifests from JSON or YAML files.
    Apply {
        /// A file or directory to apply (`-` reads stdin); repeatable. A directory means
        /// every .json, .yaml and .yml file under it, in path order. YAML files may hold
        /// several `---`-separated documents, JSON files an array of documents. Resources
        /// are sent in batches of 1,000 (`POST /api/v1/resources:batch`).
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<String>,
        /// Treat every document as this type (default: its `type` field, else a manifest if
        /// it declares `reactions`, else a resource).
        #[arg(long = "type", value_enum)]
        doc_type: Option<DocType>,
    },
    /// Show one resource (KIND/NAME) or one kind's manifest (KIND).
    Get {
        /// resource | manifest.
        #[arg(value_enum)]
        object: Object,
        /// KIND/NAME for a resource, KIND for a manifest.
        name: String,
        /// Manifest version (default: the highest).
        #[arg(long)]
        kind_version: Option<i32>,
        /// Keep watching a resource: print it, then every change (event and state) as it
        /// happens, until interrupted.
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// Wait until a resource (KIND/NAME) is in a phase; exits non-zero on --timeout (default
    /// 30s), a terminal failure, or its deletion.
    Wait {
        /// KIND/NAME.
        target: String,
        /// The phase to wait for: Ready, Degraded, Failed, Quarantined, Orphaned, Deleting or
        /// Reconciling (any case).
        #[arg(long = "for", value_name = "PHASE", value_parser = parse_phase)]
        for_phase: String,
    },
    /// List resources (roots by default) or manifests.
    List {
        /// resources (default) | manifests.
        #[arg(value_enum, default_value = "resource")]
        object: Object,
        /// Every resource, not only roots.
        #[arg(long)]
        all: bool,
        /// Only this kind (repeatable: any of them).
        #[arg(long)]
        kind: Vec<String>,
        /// Only resources with this label, as key:value (repeatable: all of them).
        #[arg(short = 'l', long = "label")]
        label: Vec<String>,
        /// Only this phase (repeatable: any of them).
        #[arg(long)]
        phase: Vec<String>,
        /// Only names containing this text (case-insensitive).
        #[arg(long)]
        name: Option<String>,
        /// At most this many rows (pages are followed up to it).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Delete a resource (KIND/NAME) and everything composed under it, or a kind version
    /// (`delete kind KIND --version N`) once no resource of it is left.
    Delete {
        /// resource | kind.
        #[arg(value_enum)]
        object: Object,
        /// KIND/NAME for a resource, KIND for a kind.
        name: String,
        /// The kind version to delete (required for a kind).
        #[arg(long = "version", visible_alias = "kind-version", value_name = "N")]
        version: Option<i32>,
    },
    /// Queue a reconcile of a resource now, even if it is in sync.
    Reconcile {
        /// KIND/NAME.
        target: String,
    },
    /// Set a resource aside: no scheduler touches it until it is unquarantined.
    Quarantine {
        /// KIND/NAME.
        target: String,
    },
    /// Lift a quarantine and re-schedule the resource.
    Unquarantine {
        /// KIND/NAME.
        target: String,
    },
    /// Show who is here: the converge processes, the workers on each broker, and how many
    /// workers serve each kind version.
    Cluster,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 500ms, 30s, 2m)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?} has an unknown unit (ms, s, m, h)")),
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("{s:?} must be positive"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A phase name for `wait --for`, in its canonical case.
fn parse_phase(s: &str) -> Result<String, String> {
    converge_proto::manifest::PHASES
        .iter()
        .find(|p| p.eq_ignore_ascii_case(s))
        .map(|p| p.to_string())
        .ok_or_else(|| {
            format!(
                "{s:?} is not a phase (one of {})",
                converge_proto::manifest::PHASES.join(", ")
            )
        })
}

/// Splits KIND/NAME.
fn kind_name(s: &str) -> anyhow::Result<(&str, &str)> {
    match s.split_once('/') {
        Some((k, n)) if !k.is_empty() && !n.is_empty() && !n.contains('/') => Ok((k, n)),
        _ => bail!("{s:?} is not KIND/NAME"),
    }
}

fn resource_path(target: &str) -> anyhow::Result<String> {
    let (k, n) = kind_name(target)?;
    Ok(format!("/resources/{}/{}", enc(k), enc(n)))
}

/// Resources sent in one `POST /api/v1/resources:batch` (the server takes up to 10,000; a
/// smaller batch keeps each request's body and its answer small).
const APPLY_BATCH: usize = 1_000;

async fn apply(
    c: &Client,
    files: &[String],
    forced: Option<DocType>,
    format: Format,
) -> anyhow::Result<bool> {
    let docs = docs::load(files, forced)?;
    let mut ok = true;
    let mut bodies = Vec::new();
    let (manifests, resources): (Vec<_>, Vec<_>) = docs
        .into_iter()
        .partition(|d| d.doc_type == DocType::Manifest);
    for d in manifests {
        let kind = d.body["kind"].as_str().unwrap_or_default().to_string();
        if kind.is_empty() {
            eprintln!("error: {}: a manifest needs a kind", d.origin);
            ok = false;
            continue;
        }
        let path = format!("/kinds/{}/manifest", enc(&kind));
        let label = format!("manifest/{kind}");
        match c.call(Method::PUT, &path, Some(&d.body)).await {
            Ok(r) => {
                // Flows of the manifest's edges left unchecked (a kind not registered yet).
                for w in r.body["warnings"].as_array().into_iter().flatten() {
                    eprintln!("warning: {label}: {}", w.as_str().unwrap_or_default());
                }
                if format == Format::Table {
                    println!("{label}: {}", r.header("x-apply-result"));
                } else {
                    bodies.push(r.body);
                }
            }
            Err(e) => ok &= refused(&label, e)?,
        }
    }
    // Resources go in batches: one request per APPLY_BATCH documents, one answer per item.
    for chunk in resources.chunks(APPLY_BATCH) {
        let labels: Vec<String> = chunk
            .iter()
            .map(|d| {
                let kind = d.body["kind"].as_str().unwrap_or_default();
                let name = d.body["name"].as_str().unwrap_or_default();
                if kind.is_empty() || name.is_empty() {
                    d.origin.clone()
                } else {
                    format!("{kind}/{name}")
                }
            })
            .collect();
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
                println!("{label}: {}", item["result"].as_str().unwrap_or_default());
            } else if let Some(o) = item.as_object_mut() {
                o.remove("index");
                o.remove("status");
                bodies.push(item);
            }
        }
    }
    if format != Format::Table {
        output::document(&Value::Array(bodies), format)?;
    }
    Ok(ok)
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

fn print_resource(r: &Value) {
    let gen_ = cell(&r["generation"]);
    print!(
        "{}",
        table(
            &["KIND", "NAME", "PHASE", "GEN", "SYNCED", "AGE"],
            &[vec![
                cell(&r["kind"]),
                cell(&r["name"]),
                cell(&r["phase"]),
                gen_,
                cell(&r["synced_gen"]),
                age(&r["created_at"]),
            ]],
        )
    );
    if let Some(owner) = r["owner"].as_object() {
        println!("\nOwner: {}/{}", cell(&owner["kind"]), cell(&owner["name"]));
    }
    if let Some(msg) = r["failure_message"].as_str() {
        println!("\nLast failure: {msg}");
    }
    if let Some(at) = r["next_attempt_at"].as_str() {
        println!("Next attempt at: {at}");
    }
    if let Some(why) = r["waiting_for"].as_str() {
        println!("\nWaiting for: {why}");
    }
    let conditions = r["conditions"].as_array().cloned().unwrap_or_default();
    if !conditions.is_empty() {
        let rows: Vec<Vec<String>> = conditions
            .iter()
            .map(|c| {
                vec![
                    cell(&c["type"]),
                    cell(&c["status"]),
                    cell(&c["reason"]),
                    age(&c["last_transition_at"]),
                    cell(&c["message"]),
                ]
            })
            .collect();
        print!(
            "\nConditions:\n{}",
            table(&["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], &rows)
        );
    }
    if let Some(w) = r["work"].as_object() {
        let state = if w["claimed"] == true {
            format!("running on {}", cell(&w["broker_id"]))
        } else {
            "queued".to_string()
        };
        println!(
            "\nWork: {} {state} (generation {}, attempt {}, trigger {})",
            cell(&w["task_type"]),
            cell(&w["generation"]),
            cell(&w["attempt"]),
            cell(&w["trigger"])
        );
    }
}

fn reactions_cell(m: &Value) -> String {
    m["reactions"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| format!("{}({})", cell(&r["name"]), cell(&r["trigger"])))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_else(|| "-".into())
}

async fn get(
    c: &Client,
    object: Object,
    name: &str,
    kind_version: Option<i32>,
    format: Format,
) -> anyhow::Result<()> {
    match object {
        Object::Resource => {
            let r = c.call(Method::GET, &resource_path(name)?, None).await?.body;
            if format == Format::Table {
                print_resource(&r);
            } else {
                output::document(&r, format)?;
            }
        }
        Object::Manifest => {
            let q: Vec<(&str, String)> = kind_version
                .map(|v| vec![("kind_version", v.to_string())])
                .unwrap_or_default();
            let path = format!("/kinds/{}/manifest{}", enc(name), query(&q));
            let m = c.call(Method::GET, &path, None).await?.body;
            if format == Format::Table {
                print!(
                    "{}",
                    table(
                        &["KIND", "VERSION", "REACTIONS", "DESCRIPTION"],
                        &[vec![
                            cell(&m["kind"]),
                            cell(&m["kind_version"]),
                            reactions_cell(&m),
                            cell(&m["description"]),
                        ]],
                    )
                );
            } else {
                output::document(&m, format)?;
            }
        }
    }
    Ok(())
}

/// The filters of `conctl list resources`.
struct ListArgs {
    all: bool,
    kind: Vec<String>,
    label: Vec<String>,
    phase: Vec<String>,
    name: Option<String>,
    limit: usize,
}

async fn list_resources(c: &Client, a: &ListArgs, format: Format) -> anyhow::Result<()> {
    let (path, field) = if a.all {
        ("/resources", "resources")
    } else {
        ("/resources/roots", "roots")
    };
    let mut base: Vec<(&str, String)> = Vec::new();
    base.extend(a.kind.iter().map(|k| ("kind", k.clone())));
    base.extend(a.phase.iter().map(|p| ("phase", p.clone())));
    base.extend(a.label.iter().map(|l| ("label", l.clone())));
    base.extend(a.name.iter().map(|n| ("name", n.clone())));
    let mut rows: Vec<Value> = Vec::new();
    let mut cursor = String::new();
    while rows.len() < a.limit {
        let mut q = base.clone();
        q.push(("limit", (a.limit - rows.len()).min(500).to_string()));
        if !cursor.is_empty() {
            q.push(("cursor", cursor.clone()));
        }
        let reply = c
            .call(Method::GET, &format!("{path}{}", query(&q)), None)
            .await?;
        let page = reply.body[field].as_array().cloned().unwrap_or_default();
        if page.is_empty() {
            break;
        }
        rows.extend(page);
        cursor = reply.header("x-next-cursor");
        if cursor.is_empty() {
            break;
        }
    }
    rows.truncate(a.limit);
    if format != Format::Table {
        return output::document(&Value::Array(rows), format);
    }
    let out = if a.all {
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let owner = r["owner"]
                    .as_object()
                    .map(|o| format!("{}/{}", cell(&o["kind"]), cell(&o["name"])))
                    .unwrap_or_else(|| "-".into());
                vec![
                    cell(&r["kind"]),
                    cell(&r["name"]),
                    cell(&r["phase"]),
                    cell(&r["generation"]),
                    owner,
                ]
            })
            .collect();
        table(&["KIND", "NAME", "PHASE", "GEN", "OWNER"], &cells)
    } else {
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    cell(&r["kind"]),
                    cell(&r["name"]),
                    cell(&r["phase"]),
                    cell(&r["resource_count"]),
                    cell(&r["generation"]),
                ]
            })
            .collect();
        table(&["KIND", "NAME", "PHASE", "CHILDREN", "GEN"], &cells)
    };
    if rows.is_empty() {
        eprintln!("no resources found");
    } else {
        print!("{out}");
    }
    Ok(())
}

async fn list_manifests(c: &Client, format: Format) -> anyhow::Result<()> {
    let kinds = c.call(Method::GET, "/kinds", None).await?.body["kinds"].clone();
    let kinds = kinds.as_array().cloned().unwrap_or_default();
    if format != Format::Table {
        return output::document(&Value::Array(kinds), format);
    }
    let rows: Vec<Vec<String>> = kinds
        .iter()
        .map(|m| {
            vec![
                cell(&m["kind"]),
                cell(&m["kind_version"]),
                reactions_cell(m),
                cell(&m["finalizer_name"]),
                cell(&m["operational"]["max_inflight"]),
                cell(&m["description"]),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &[
                "KIND",
                "VERSION",
                "REACTIONS",
                "FINALIZER",
                "MAX-INFLIGHT",
                "DESCRIPTION"
            ],
            &rows
        )
    );
    Ok(())
}

/// Prints an action's outcome: a line for people, the reply for scripts.
fn report(format: Format, line: String, body: &Value) -> anyhow::Result<()> {
    if format == Format::Table {
        println!("{line}");
        Ok(())
    } else {
        output::document(body, format)
    }
}

async fn run(cli: Cli) -> anyhow::Result<bool> {
    let token = Token::new(cli.token.as_deref())?;
    let c = Client::new(&cli.server, cli.timeout, token, cli.ca_file.as_deref())?;
    let f = cli.output;
    match cli.command {
        Command::Apply { files, doc_type } => return apply(&c, &files, doc_type, f).await,
        Command::Get {
            object,
            name,
            kind_version,
            watch,
        } => {
            if !watch {
                get(&c, object, &name, kind_version, f).await?;
            } else if object == Object::Resource {
                watch::print_changes(&c, &name, &resource_path(&name)?, f).await?;
            } else {
                bail!("--watch follows resources only");
            }
        }
        Command::Wait { target, for_phase } => {
            let path = resource_path(&target)?;
            watch::wait_for(&c, &target, &path, &for_phase, cli.timeout).await?;
        }
        Command::List {
            object: Object::Manifest,
            ..
        } => list_manifests(&c, f).await?,
        Command::List {
            object: Object::Resource,
            all,
            kind,
            label,
            phase,
            name,
            limit,
        } => {
            let args = ListArgs {
                all,
                kind,
                label,
                phase,
                name,
                limit,
            };
            list_resources(&c, &args, f).await?
        }
        Command::Delete {
            object: Object::Resource,
            name,
            version,
        } => {
            if version.is_some() {
                bail!("--version is for `delete kind`; a resource is deleted as KIND/NAME");
            }
            let r = c.call(Method::DELETE, &resource_path(&name)?, None).await?;
            report(f, format!("{name}: deletion requested"), &r.body)?;
        }
        Command::Delete {
            object: Object::Manifest,
            name,
            version,
        } => {
            let Some(version) = version else {
                bail!(
                    "which version of kind {name:?}? add --version N (`conctl list kinds` lists them)"
                );
            };
            let path = format!("/kinds/{}/versions/{version}", enc(&name));
            c.call(Method::DELETE, &path, None).await?;
            let body =
                serde_json::json!({"kind": name, "kind_version": version, "result": "deleted"});
            report(f, format!("kind {name} version {version}: deleted"), &body)?;
        }
        Command::Reconcile { target } => {
            let path = format!("{}/reconcile", resource_path(&target)?);
            let r = c.call(Method::POST, &path, None).await?;
            let line = match r.body["status"].as_str() {
                Some("already_queued") => format!("{target}: a reconcile is already queued"),
                _ => format!("{target}: reconcile queued"),
            };
            report(f, line, &r.body)?;
        }
        Command::Quarantine { target } => {
            let path = format!("{}/quarantine", resource_path(&target)?);
            let r = c.call(Method::POST, &path, None).await?;
            report(f, format!("{target}: quarantined"), &r.body)?;
        }
        Command::Unquarantine { target } => {
            let path = format!("{}/unquarantine", resource_path(&target)?);
            let r = c.call(Method::POST, &path, None).await?;
            report(f, format!("{target}: unquarantined"), &r.body)?;
        }
        Command::Cluster => cluster::show(&c, f).await?,
    }
    Ok(true)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_addresses_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("3d").is_err());
        assert_eq!(kind_name("hello/world").unwrap(), ("hello", "world"));
        assert!(kind_name("hello").is_err());
        assert!(kind_name("a/b/c").is_err());
    }

    #[test]
    fn the_token_is_a_global_flag_whose_env_value_help_never_shows() {
        use clap::CommandFactory;
        let cli = Cli::try_parse_from(["conctl", "list", "--token", "t0k"]).unwrap();
        assert_eq!(cli.token.as_deref(), Some("t0k"));
        let cli = Cli::try_parse_from(["conctl", "--token", "t0k", "list"]).unwrap();
        assert_eq!(cli.token.as_deref(), Some("t0k"));
        let cmd = Cli::command();
        let arg = cmd.get_arguments().find(|a| a.get_id() == "token").unwrap();
        assert_eq!(
            arg.get_env().and_then(|e| e.to_str()),
            Some("CONVERGE_TOKEN")
        );
        // `conctl --help` with CONVERGE_TOKEN set must not print the token.
        assert!(arg.is_hide_env_values_set());
        let cli = Cli::try_parse_from(["conctl", "list", "--ca-file", "/etc/ca.pem"]).unwrap();
        assert_eq!(cli.ca_file, Some(PathBuf::from("/etc/ca.pem")));
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == "ca_file")
            .unwrap();
        assert_eq!(
            arg.get_env().and_then(|e| e.to_str()),
            Some("CONVERGE_CA_FILE")
        );
    }
}
