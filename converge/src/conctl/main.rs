//! `conctl`: the command-line client of the converge HTTP API — apply and sync JSON/YAML
//! files (resources, kind manifests, provider configs, reactor bindings), get (or watch),
//! list, delete, wait for a phase, events and spec history, the operator actions
//! (reconcile, quarantine, unquarantine, rollback), what an apply would change (diff),
//! rendering a composition with no server (render), who is here (cluster), and API tokens (token new|list|revoke).

mod apply;
mod client;
mod cluster;
mod diff;
mod docs;
mod events;
mod output;
mod render;
mod status;
mod tokens;
mod transport;
mod watch;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::bail;
use clap::{Parser, Subcommand, ValueEnum};
use hyper::Method;
use serde_json::Value;

use client::{Client, Token, enc, query};
use docs::DocType;
use output::{Format, age, cell, clip, out, outln, table};

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
    /// Create or update resources, kind manifests, provider configs and reactor bindings
    /// from JSON or YAML files.
    #[command(after_help = APPLY_HELP)]
    Apply {
        /// A file or directory to apply (`-` reads stdin); repeatable. A directory means
        /// every .json, .yaml and .yml file under it, in path order. YAML files may hold
        /// several `---`-separated documents, JSON files an array of documents.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<String>,
        /// Treat every document as this type (default: its `type` field, else its shape).
        #[arg(long = "type", value_enum)]
        doc_type: Option<DocType>,
    },
    /// Show what `apply` of the same files would change, with nothing written: the spec diff
    /// of each resource and, for a Starlark or CEL composite, the children and edges its
    /// compose would add, change and remove. Exit 0: no change; 1: changes; 2: an error.
    #[command(after_help = DIFF_HELP)]
    Diff {
        /// A file or directory (`-` reads stdin); repeatable, as for `apply`.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<String>,
        /// Treat every document as this type (default: its `type` field, else its shape).
        #[arg(long = "type", value_enum)]
        doc_type: Option<DocType>,
    },
    /// Apply files (as `apply`), then prune: delete the roots that carry every -l label and
    /// that no file defines any more.
    #[command(after_help = SYNC_HELP)]
    Sync {
        /// A file or directory to apply (`-` reads stdin); repeatable.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<String>,
        /// Treat every document as this type (default: its `type` field, else its shape).
        #[arg(long = "type", value_enum)]
        doc_type: Option<DocType>,
        /// Delete the labelled roots the files no longer define (needs at least one -l).
        #[arg(long)]
        prune: bool,
        /// The label every managed resource carries, as KEY=VALUE (repeatable: all of
        /// them). Only roots with all of these are ever pruned.
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = apply::parse_label)]
        labels: Vec<(String, String)>,
        /// Print what would be created, configured, left unchanged and deleted; change
        /// nothing.
        #[arg(long)]
        plan: bool,
    },
    /// Show one resource (KIND/NAME) or one kind's manifest (`get manifest KIND`).
    #[command(after_help = GET_HELP)]
    Get {
        /// KIND/NAME of a resource; or `resource` or `manifest`, followed by the name.
        #[arg(value_name = "KIND/NAME")]
        first: String,
        /// With `resource`: KIND/NAME; with `manifest`: KIND.
        #[arg(value_name = "NAME")]
        second: Option<String>,
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
    #[command(after_help = WAIT_HELP)]
    Wait {
        /// KIND/NAME.
        target: String,
        /// The phase to wait for: Ready, Degraded, Failed, Quarantined, Orphaned, Deleting or
        /// Reconciling (any case).
        #[arg(long = "for", value_name = "PHASE", value_parser = parse_phase)]
        for_phase: String,
    },
    /// List resources (roots by default, every resource with --all, a resource's children
    /// with --owner) or manifests.
    #[command(after_help = LIST_HELP)]
    List {
        /// resources (default) | manifests.
        #[arg(value_enum, default_value = "resource")]
        object: Object,
        /// Every resource, not only roots.
        #[arg(long, conflicts_with = "owner")]
        all: bool,
        /// Only the direct children of this resource (KIND/NAME).
        #[arg(long, value_name = "KIND/NAME")]
        owner: Option<String>,
        /// Only this kind (repeatable: any of them).
        #[arg(long)]
        kind: Vec<String>,
        /// Only resources with this label, as KEY=VALUE or KEY:VALUE (repeatable: all of
        /// them).
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = apply::parse_label)]
        label: Vec<(String, String)>,
        /// Only this phase (repeatable: any of them).
        #[arg(long)]
        phase: Vec<String>,
        /// Only names containing this text (case-insensitive).
        #[arg(long)]
        name: Option<String>,
        /// The order: created (oldest first) or problems (Failed, Quarantined, Degraded,
        /// Orphaned first, then the rest oldest first).
        #[arg(long, value_enum, default_value = "created")]
        sort: ListOrder,
        /// At most this many rows (pages are followed up to it).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Show the newest events of one resource (KIND/NAME) or of every resource: phase
    /// changes with their failure messages, creations, deletions and operations.
    Events {
        /// KIND/NAME (default: every resource's events).
        target: Option<String>,
        /// Only this kind's events (without KIND/NAME).
        #[arg(long, conflicts_with = "target")]
        kind: Option<String>,
        /// How many of the newest events to show (1-1000).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=1000))]
        limit: u16,
        /// Then follow: print every new event as it happens, until interrupted.
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// Show a root's recorded specs (newest first, with what each changed), or with --diff
    /// the changes between two of them.
    #[command(after_help = HISTORY_HELP)]
    History {
        /// KIND/NAME of a root (only roots keep spec history).
        target: String,
        /// Show the changes: of the newest generation (no value), of generation N against
        /// the one recorded before it, or from generation A to B (`A..B`).
        #[arg(long, value_name = "N|A..B", num_args = 0..=1, value_parser = events::parse_range)]
        diff: Option<Option<(Option<i64>, i64)>>,
    },
    /// Put a root's recorded spec of an earlier generation back (as a new generation; see
    /// `history`).
    Rollback {
        /// KIND/NAME of a root.
        target: String,
        /// The recorded generation whose spec becomes the spec again.
        #[arg(long = "to", value_name = "GENERATION")]
        to: i64,
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
    /// API tokens with a life cycle (admin): mint one (shown once), list, revoke.
    Token {
        #[command(subcommand)]
        command: tokens::TokenCommand,
    },
    /// Run a composite's composer (a CEL graph or a Starlark bundle, from its provider
    /// config) on a root document, with no server: print the children, edges and status it
    /// would produce.
    Render {
        /// The root: a resource document (kind, name, spec, labels).
        #[arg(short = 'f', long = "file", value_name = "ROOT")]
        root: String,
        /// The provider config document the API takes: a CEL graph in its `spec`, or a
        /// Starlark bundle in its `data`.
        #[arg(long, value_name = "PROVIDERCONFIG")]
        config: String,
        /// A directory holding the Starlark bundle's files (`compose.star` at its root),
        /// instead of the config's `data`.
        #[arg(long, value_name = "DIR")]
        bundle: Option<PathBuf>,
        /// Statuses of children (`KIND/NAME: status`, or documents with kind, name and
        /// status) to flow into their dependents' specs, as the engine would.
        #[arg(long, value_name = "FILE")]
        observed: Option<String>,
    },
}

const APPLY_HELP: &str = "\
Document types, applied in this order:
  manifest         PUT /api/v1/kinds/{kind}/manifest     (declares `reactions`)
  providerconfig   POST /api/v1/providerconfigs          (has `is_default` or `data`)
  reactor-binding  POST /api/v1/reactor-bindings         (has `watch_kind`, `reactor` or `transition`)
  resource         POST /api/v1/resources:batch          (anything else; 1,000 a request)
A document's type is --type, else its `type` field, else its shape (in brackets). Two
documents naming the same object (a resource's kind/name, a manifest's kind and version, a
config's or binding's name) are refused, naming both, before anything is applied.

Examples:
  conctl apply -f examples/classic/
  conctl apply -f kind.yaml -f resources.yaml
  cat hello.json | conctl apply -f -";

const DIFF_HELP: &str = "\
The server plans each resource document (POST /api/v1/resources:plan) and writes nothing.
Per resource that would change: `--- stored` / `+++ applied`, then `-POINTER: OLD` and
`+POINTER: NEW` lines; a composite's children (+ added, - removed, changed ones with their
own lines) and edges follow. Unchanged resources print nothing. Manifests, provider configs
and reactor bindings are not diffed. -o json|yaml prints the plan.
Exit status: 0 no changes, 1 changes, 2 an error (a document the apply would refuse, a
compose that would fail, a failed call), as `kubectl diff`.

Examples:
  conctl diff -f examples/classic/
  conctl diff -f bom.yaml && echo up to date";

const SYNC_HELP: &str = "\
Examples:
  conctl sync -f deploy/ --prune -l app=shop --plan   # what would change; changes nothing
  conctl sync -f deploy/ --prune -l app=shop          # apply, then delete removed roots
Only roots carrying every label are pruned, through the API's delete (their composed
children go with them); resources without the labels are never touched. Nothing is pruned
when a document was refused.";

const GET_HELP: &str = "\
Examples:
  conctl get hello/world                 # phase, READY, what it is doing, conditions, work
  conctl get hello/world -o yaml
  conctl get hello/world --watch
  conctl get manifest hello --kind-version 1
  conctl get resource hello/world        # the same as `conctl get hello/world`";

const WAIT_HELP: &str = "\
A failure that predates the wait does not end it while a new attempt is queued or running
(`conctl reconcile X && conctl wait X --for=Ready`), nor does a transient failure being
retried: only a terminal failure of an attempt made during the wait, one standing with
nothing queued to retry it, the deletion, or --timeout ends it with status 1.";

const LIST_HELP: &str = "\
Tables show READY and a MESSAGE: the failure (`terminal: ...` or `retrying (attempt N in
3s): ...`), the waiting reason, or the Ready condition of what is not ready.

Examples:
  conctl list                                   # roots
  conctl list --all -l team=web --phase Failed
  conctl list --all --sort problems            # what needs a person, first
  conctl list --owner classicbom/demo-bom       # its direct children
  conctl list manifests";

const HISTORY_HELP: &str = "\
Examples:
  conctl history hello/world              # GEN AGE CHANGES
  conctl history hello/world --diff       # the newest change
  conctl history hello/world --diff 3     # generation 3 against the one before it
  conctl history hello/world --diff 1..4";

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
    use converge_engine::words::Phase;
    Phase::TEXTS
        .iter()
        .find(|p| p.eq_ignore_ascii_case(s))
        .map(|p| p.to_string())
        .ok_or_else(|| format!("{s:?} is not a phase (one of {})", Phase::TEXTS.join(", ")))
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

fn print_resource(r: &Value) {
    out!(
        "{}",
        table(
            &[
                "KIND", "NAME", "PHASE", "READY", "GEN", "SYNCED", "AGE", "MESSAGE"
            ],
            &[vec![
                cell(&r["kind"]),
                cell(&r["name"]),
                cell(&r["phase"]),
                status::ready(r),
                cell(&r["generation"]),
                cell(&r["synced_gen"]),
                age(&r["created_at"]),
                match status::message(r) {
                    m if m.is_empty() => "-".into(),
                    m => clip(&m, MESSAGE_WIDTH),
                },
            ]],
        )
    );
    if let Some(owner) = r["owner"].as_object() {
        outln!("\nOwner: {}/{}", cell(&owner["kind"]), cell(&owner["name"]));
    }
    if let Some(msg) = r["failure_message"].as_str() {
        let how = if r["failure_terminal"] == true {
            "terminal"
        } else {
            "transient"
        };
        outln!(
            "\nLast failure ({how}, generation {}, attempt {}): {msg}",
            cell(&r["failure_gen"]),
            cell(&r["failure_attempts"])
        );
    }
    if let Some(at) = r["next_attempt_at"].as_str() {
        outln!("Next attempt at: {at}");
    }
    if let Some(why) = r["waiting_for"].as_str() {
        outln!("\nWaiting for: {why}");
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
        out!(
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
        outln!(
            "\nWork: {} {state} (generation {}, attempt {}, trigger {})",
            cell(&w["task_type"]),
            cell(&w["generation"]),
            cell(&w["attempt"]),
            cell(&w["trigger"])
        );
    }
}

/// The widest MESSAGE cell of a resource table.
const MESSAGE_WIDTH: usize = 80;

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

/// What `get FIRST [SECOND]` names: `get KIND/NAME` is a resource; `get resource
/// KIND/NAME` and `get manifest KIND` name the object type first.
fn get_target(first: &str, second: Option<&str>) -> anyhow::Result<(Object, String)> {
    match second {
        Some(name) => {
            let object = Object::from_str(first, true).map_err(|_| {
                anyhow::anyhow!(
                    "{first:?} is not `resource` or `manifest` (conctl get KIND/NAME, conctl get \
                     manifest KIND)"
                )
            })?;
            Ok((object, name.to_string()))
        }
        None if first.contains('/') => Ok((Object::Resource, first.to_string())),
        None => {
            bail!("{first:?} is not KIND/NAME (a kind's manifest: conctl get manifest {first})")
        }
    }
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
                out!(
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
    owner: Option<String>,
    kind: Vec<String>,
    label: Vec<(String, String)>,
    phase: Vec<String>,
    name: Option<String>,
    sort: ListOrder,
    limit: usize,
}

/// The order of `conctl list` (the API's `sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ListOrder {
    Created,
    Problems,
}

async fn list_resources(c: &Client, a: &ListArgs, format: Format) -> anyhow::Result<()> {
    let (path, field) = match &a.owner {
        Some(owner) => (format!("{}/children", resource_path(owner)?), "resources"),
        None if a.all => ("/resources".to_string(), "resources"),
        None => ("/resources/roots".to_string(), "roots"),
    };
    let mut q: Vec<(&str, String)> = Vec::new();
    q.extend(a.kind.iter().map(|k| ("kind", k.clone())));
    q.extend(a.phase.iter().map(|p| ("phase", p.clone())));
    q.extend(apply::label_query(&a.label));
    q.extend(a.name.iter().map(|n| ("name", n.clone())));
    if a.sort == ListOrder::Problems {
        q.push(("sort", "problems".into()));
    }
    let rows = c.pages(&path, field, &q, a.limit).await?;
    if format != Format::Table {
        return output::document(&Value::Array(rows), format);
    }
    if rows.is_empty() {
        eprintln!("no resources found");
        return Ok(());
    }
    let messages = status::messages(c, &rows).await;
    let roots = a.owner.is_none() && !a.all;
    let cells: Vec<Vec<String>> = rows
        .iter()
        .zip(&messages)
        .map(|(r, message)| {
            let mut row = vec![
                cell(&r["kind"]),
                cell(&r["name"]),
                cell(&r["phase"]),
                status::ready(r),
            ];
            if roots {
                row.push(cell(&r["resource_count"]));
            }
            row.push(cell(&r["generation"]));
            if a.all {
                row.push(
                    r["owner"]
                        .as_object()
                        .map(|o| format!("{}/{}", cell(&o["kind"]), cell(&o["name"])))
                        .unwrap_or_else(|| "-".into()),
                );
            }
            row.push(clip(message, MESSAGE_WIDTH));
            row
        })
        .collect();
    let headers: &[&str] = if roots {
        &[
            "KIND", "NAME", "PHASE", "READY", "CHILDREN", "GEN", "MESSAGE",
        ]
    } else if a.all {
        &["KIND", "NAME", "PHASE", "READY", "GEN", "OWNER", "MESSAGE"]
    } else {
        &["KIND", "NAME", "PHASE", "READY", "GEN", "MESSAGE"]
    };
    out!("{}", table(headers, &cells));
    let unread = rows.iter().filter(|r| r["is_ready"] != true).count();
    if unread > status::MESSAGE_ROWS {
        eprintln!(
            "note: MESSAGE shown for the first {} rows that are not ready",
            status::MESSAGE_ROWS
        );
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
    out!(
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
        outln!("{line}");
        Ok(())
    } else {
        output::document(body, format)
    }
}

/// `conctl diff`.
async fn diff_command(cli: Cli) -> anyhow::Result<diff::Found> {
    let Command::Diff { files, doc_type } = cli.command else {
        unreachable!("called for diff only")
    };
    let token = Token::new(cli.token.as_deref())?;
    let c = Client::new(&cli.server, cli.timeout, token, cli.ca_file.as_deref())?;
    diff::diff(&c, &files, doc_type, cli.output).await
}

async fn run(cli: Cli) -> anyhow::Result<bool> {
    if let Command::Render {
        root,
        config,
        bundle,
        observed,
    } = cli.command
    {
        // No server: nothing to connect to, nothing to authenticate.
        let args = render::Args {
            root,
            config,
            bundle,
            observed,
            timeout: cli.timeout,
        };
        render::render(args, cli.output).await?;
        return Ok(true);
    }
    let token = Token::new(cli.token.as_deref())?;
    let c = Client::new(&cli.server, cli.timeout, token, cli.ca_file.as_deref())?;
    let f = cli.output;
    match cli.command {
        Command::Apply { files, doc_type } => return apply::apply(&c, &files, doc_type, f).await,
        Command::Sync {
            files,
            doc_type,
            prune,
            labels,
            plan,
        } => {
            let args = apply::SyncArgs {
                files,
                forced: doc_type,
                prune,
                labels,
                plan,
            };
            return apply::sync(&c, &args, f).await;
        }
        Command::Get {
            first,
            second,
            kind_version,
            watch,
        } => {
            let (object, name) = get_target(&first, second.as_deref())?;
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
            owner,
            kind,
            label,
            phase,
            name,
            sort,
            limit,
        } => {
            let args = ListArgs {
                all,
                owner,
                kind,
                label,
                phase,
                name,
                sort,
                limit,
            };
            list_resources(&c, &args, f).await?
        }
        Command::Events {
            target,
            kind,
            limit,
            watch,
        } => {
            let filter = match &target {
                Some(t) => {
                    let (k, n) = kind_name(t)?;
                    events::Filter {
                        kind: Some(k.into()),
                        name: Some(n.into()),
                    }
                }
                None => events::Filter { kind, name: None },
            };
            events::show(&c, &filter, usize::from(limit), watch, f).await?;
        }
        Command::History { target, diff } => {
            let path = resource_path(&target)?;
            events::history(&c, &target, &path, diff, f).await?;
        }
        Command::Rollback { target, to } => {
            let path = format!("{}/rollback", resource_path(&target)?);
            let r = c
                .call(
                    Method::POST,
                    &path,
                    Some(&serde_json::json!({"generation": to})),
                )
                .await?;
            let line = if r.body["changed"] == true {
                format!(
                    "{target}: generation {} has the spec of generation {to}",
                    r.body["generation"]
                )
            } else {
                format!("{target}: the spec already is generation {to}'s; nothing changed")
            };
            report(f, line, &r.body)?;
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
        Command::Token { command } => tokens::run(&c, command, f).await?,
        Command::Render { .. } => unreachable!("handled above, without a client"),
        Command::Diff { .. } => unreachable!("handled in main, for its exit codes"),
    }
    Ok(true)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Diff { .. }) {
        // Its own exit codes, kubectl diff's: 0, 1 (changes), 2 (an error).
        return match diff_command(cli).await {
            Ok(found) => ExitCode::from(found.code()),
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(diff::Found::Error.code())
            }
        };
    }
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
    fn get_takes_kind_name_alone_or_after_the_object_type() {
        assert_eq!(
            get_target("hello/world", None).unwrap(),
            (Object::Resource, "hello/world".to_string())
        );
        assert_eq!(
            get_target("resource", Some("hello/world")).unwrap(),
            (Object::Resource, "hello/world".to_string())
        );
        assert_eq!(
            get_target("manifest", Some("hello")).unwrap(),
            (Object::Manifest, "hello".to_string())
        );
        let e = get_target("hello", None).unwrap_err().to_string();
        assert!(e.contains("conctl get manifest hello"), "{e}");
        assert!(get_target("pods", Some("x")).is_err());
        let cli = Cli::try_parse_from(["conctl", "history", "k/n", "--diff"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::History {
                diff: Some(None),
                ..
            }
        ));
        let cli = Cli::try_parse_from(["conctl", "history", "k/n", "--diff", "1..3"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::History {
                diff: Some(Some((Some(1), 3))),
                ..
            }
        ));
        let cli = Cli::try_parse_from(["conctl", "history", "k/n"]).unwrap();
        assert!(matches!(cli.command, Command::History { diff: None, .. }));
        assert!(Cli::try_parse_from(["conctl", "events", "--limit", "0"]).is_err());
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
