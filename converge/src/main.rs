//! The `converge` binary: `serve` (default), `migrate up|status`, `secrets rotate|status`,
//! and `dev` (the embedded default: starts a private PostgreSQL when DATABASE_URL is unset,
//! makes its own secrets key, then serves ROLE=all).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use converge_control::{config::Config, devdb, logging};
use converge_engine::db;

mod allocator;
mod banner;
mod secrets;
mod server;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "converge",
    version,
    about = "converge: declarative resources reconciled on PostgreSQL"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the duties ROLE names (all | control | broker) against DATABASE_URL.
    Serve,
    /// Manage the schema.
    Migrate {
        #[command(subcommand)]
        action: MigrateAction,
    },
    /// Provider config secrets sealed at rest (SECRETS_KEY_FILE, SECRETS_OLD_KEY_FILES).
    Secrets {
        #[command(subcommand)]
        action: SecretsAction,
    },
    /// Manage bearer tokens for AUTH_FILE.
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// Run everything locally (listening on 127.0.0.1 unless LISTEN_ADDR/BROKER_LISTEN_ADDR
    /// say otherwise); without DATABASE_URL, start a private PostgreSQL first.
    Dev {
        /// Where the private PostgreSQL keeps its data.
        #[arg(long, env = "CONVERGE_DEV_DIR", default_value = ".converge")]
        data_dir: PathBuf,
        /// Loopback port for the private PostgreSQL (default: a free one).
        #[arg(long, env = "CONVERGE_DEV_PG_PORT")]
        pg_port: Option<u16>,
    },
    /// Print the HTTP API's OpenAPI document (what `GET /openapi.json` serves), for
    /// `scripts/gen-api-types.sh`; needs no database or configuration.
    #[command(hide = true)]
    Openapi,
}

#[derive(Subcommand)]
enum TokenAction {
    /// Print a new random token (once: only its SHA-256 is ever stored) and the AUTH_FILE
    /// line that grants it.
    New {
        /// The principal's name (recorded as the actor of what it does).
        #[arg(long)]
        name: String,
        /// viewer | operator | admin | worker.
        #[arg(long)]
        role: converge_auth::Role,
        /// For workers: comma-separated globs of the kinds it may serve (e.g. vpc,net-*).
        #[arg(long, value_delimiter = ',')]
        kinds: Vec<String>,
    },
}

/// Prints a new token and the AUTH_FILE entry for it; refuses what AUTH_FILE would refuse.
fn token_new(name: &str, role: converge_auth::Role, kinds: &[String]) -> anyhow::Result<()> {
    use converge_auth::{Role, token};
    match (role, kinds.is_empty()) {
        (Role::Worker, true) => {
            anyhow::bail!("a worker needs --kinds (globs, e.g. --kinds 'vpc,net-*' or '*')")
        }
        (r, false) if r != Role::Worker => anyhow::bail!("--kinds applies to role worker only"),
        _ => {}
    }
    let secret = token::mint().context("the system's random source failed")?;
    let mut entry = serde_json::json!({
        "name": name,
        "role": role.as_str(),
        "token_sha256": token::digest_hex(&secret),
    });
    if !kinds.is_empty() {
        entry["kinds"] = serde_json::json!(kinds);
    }
    // Check the line parses as AUTH_FILE will parse it.
    converge_auth::principals::parse(&format!("principals: [{entry}]"))?;
    println!("token (shown once; give it to {name} and keep it secret):");
    println!("  {secret}");
    println!();
    println!("add to the principals list of AUTH_FILE (converge re-reads it within a second):");
    println!("  - {entry}");
    Ok(())
}

#[derive(Subcommand)]
enum SecretsAction {
    /// Re-seal under the current key every value sealed under an old one (or stored in
    /// plain text); exits non-zero when a value opens under no configured key.
    Rotate,
    /// Count the sealed values per key id and the writeOnly values in plain text.
    Status,
}

#[derive(Subcommand)]
enum MigrateAction {
    /// Apply pending migrations and changed engine files (safe to run from many processes at
    /// once).
    Up,
    /// List migrations and whether each is applied, and each engine file (applied, changed
    /// or new).
    Status,
}

fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("signal received");
        t.cancel();
    });
    token
}

fn main() -> anyhow::Result<()> {
    allocator::tune();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Command::Token {
        action: TokenAction::New { name, role, kinds },
    }) = &cli.command
    {
        return token_new(name, *role, kinds);
    }
    if let Some(Command::Openapi) = &cli.command {
        print!("{}", converge_control::http::openapi::document_json());
        return Ok(());
    }
    logging::init()?;
    let cfg = Config::from_env()?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Token {
            action: TokenAction::New { name, role, kinds },
        } => token_new(&name, role, &kinds),
        Command::Openapi => unreachable!("answered before the configuration is read"),
        Command::Serve => server::run(cfg, shutdown_on_signal()).await,
        Command::Migrate { action } => {
            let url = cfg
                .database_url
                .clone()
                .context("DATABASE_URL is required")?;
            // The same sign-in as `serve`: DATABASE_PASSWORD_COMMAND runs for it too, and
            // DB_IAM_AUTH mints its token.
            let (pool, _) =
                db::connect_signed_in(&url, 2, &db::EngineSettings::default(), &cfg.signin())
                    .await
                    .map_err(server::signin_error)?;
            match action {
                MigrateAction::Up => {
                    db::migrate(&pool).await?;
                    println!("migrations and engine files applied");
                }
                MigrateAction::Status => {
                    for m in db::migration_status(&pool).await? {
                        let state = if m.applied { "applied" } else { "pending" };
                        println!("{:>4}  {:<8}  {}", m.version, state, m.description);
                    }
                    for f in db::engine_sql::engine_file_status(&pool).await? {
                        let state = match f.state {
                            db::engine_sql::EngineFileState::Applied => "applied",
                            db::engine_sql::EngineFileState::Changed => "changed",
                            db::engine_sql::EngineFileState::New => "new",
                        };
                        let at = f.applied_at.map(|t| t.to_rfc3339()).unwrap_or_default();
                        println!("engine/sql/{:<16}  {:<8}  {at}", f.file, state);
                    }
                }
            }
            Ok(())
        }
        Command::Secrets { action } => {
            let url = cfg
                .database_url
                .clone()
                .context("DATABASE_URL is required")?;
            let keys = converge_engine::sealing::Keyring::load(&cfg.secrets)
                .await
                .context("loading the secrets keys")?;
            let (pool, _) =
                db::connect_signed_in(&url, 2, &db::EngineSettings::default(), &cfg.signin())
                    .await
                    .map_err(server::signin_error)?;
            let rotate = matches!(action, SecretsAction::Rotate);
            let mut out = std::io::stdout().lock();
            let report = secrets::scan(&pool, &keys, rotate, &mut out).await?;
            secrets::print(&report, &keys, !rotate, &mut out)?;
            if !report.failures.is_empty() {
                anyhow::bail!(
                    "{} values could not be opened with the configured keys",
                    report.failures.len()
                );
            }
            Ok(())
        }
        Command::Dev { data_dir, pg_port } => {
            let mut cfg = cfg;
            cfg.dev_loopback(|var| std::env::var(var).ok());
            if cfg.secrets.key_file.is_none() && cfg.secrets.key_command.is_none() {
                cfg.secrets.key_file = Some(secrets::dev_key_file(&data_dir)?);
            }
            cfg.banner = true;
            let shutdown = shutdown_on_signal();
            if cfg.database_url.is_some() {
                return server::run(cfg, shutdown).await;
            }
            let pg = devdb::DevDb::start(devdb::DevDbConfig {
                data_dir,
                port: pg_port,
                settings: Vec::new(),
            })
            .await
            .context("starting the private PostgreSQL")?;
            cfg.database_url = Some(pg.url());
            let result = server::run(cfg, shutdown).await;
            if let Err(e) = pg.stop().await {
                tracing::warn!(error = %e, "stopping the private PostgreSQL failed");
            }
            result
        }
    }
}
