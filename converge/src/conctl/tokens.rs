//! `conctl token new|list|revoke`: API tokens with a life cycle (`/api/v1/tokens`, admin
//! only). `new` prints the secret once (the server keeps only its hash); `list` never shows
//! one. (`converge token new` is different: it mints a token for an `AUTH_FILE` line, with
//! no server involved.)

use clap::Subcommand;
use hyper::Method;
use serde_json::{Value, json};

use crate::{
    client::{Client, enc},
    output::{self, Format, age, cell, outln, table},
};

/// The `token` subcommands.
#[derive(Subcommand)]
pub enum TokenCommand {
    /// Mint a token (printed once: store it now; the server keeps only its hash).
    New {
        /// The principal's name (not one AUTH_FILE uses).
        name: String,
        /// viewer | operator | admin | worker.
        #[arg(long)]
        role: String,
        /// For a worker: globs of the kinds it may serve, comma-separated (`net-*,vpc`).
        #[arg(long, value_delimiter = ',')]
        kinds: Vec<String>,
        /// How long until it stops working (`3600`, `90m`, `12h`, `30d`; at most `365d`).
        /// Default: never.
        #[arg(long = "expires-in", value_name = "DURATION", value_parser = parse_lifetime)]
        expires_in: Option<u64>,
    },
    /// List the minted tokens (name, role, kinds, created, expires, last used).
    List,
    /// Revoke a token: every pod refuses it within a second, its open streams close.
    Revoke {
        /// The token's name.
        name: String,
    },
}

/// `N`, `Ns`, `Nm`, `Nh` or `Nd` as whole seconds.
pub fn parse_lifetime(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 3600, 90m, 12h, 30d)"))?;
    let mult = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return Err(format!("{s:?} has an unknown unit (s, m, h, d)")),
    };
    match n.checked_mul(mult) {
        Some(0) => Err(format!("{s:?} must be positive")),
        Some(secs) => Ok(secs),
        None => Err(format!("{s:?} is too long")),
    }
}

/// Runs one `token` subcommand.
pub async fn run(c: &Client, cmd: TokenCommand, format: Format) -> anyhow::Result<()> {
    match cmd {
        TokenCommand::New {
            name,
            role,
            kinds,
            expires_in,
        } => {
            let mut body = json!({"name": name, "role": role});
            if !kinds.is_empty() {
                body["kinds"] = json!(kinds);
            }
            if let Some(s) = expires_in {
                body["expires_in"] = json!(s);
            }
            let r = c.call(Method::POST, "/tokens", Some(&body)).await?;
            if format != Format::Table {
                return output::document(&r.body, format);
            }
            let expires = match &r.body["expires_at"] {
                Value::Null => "never expires".to_string(),
                v => format!("expires {}", cell(v)),
            };
            outln!(
                "token {} (role {}, {expires}); shown this once:",
                cell(&r.body["name"]),
                cell(&r.body["role"])
            );
            outln!("{}", cell(&r.body["token"]));
        }
        TokenCommand::List => {
            let r = c.call(Method::GET, "/tokens", None).await?;
            if format != Format::Table {
                return output::document(&r.body, format);
            }
            output::out!("{}", render(&r.body));
        }
        TokenCommand::Revoke { name } => {
            c.call(Method::DELETE, &format!("/tokens/{}", enc(&name)), None)
                .await?;
            let body = json!({"name": name, "result": "revoked"});
            if format != Format::Table {
                return output::document(&body, format);
            }
            outln!("token {name}: revoked");
        }
    }
    Ok(())
}

fn render(body: &Value) -> String {
    let items = body["items"].as_array().cloned().unwrap_or_default();
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|t| {
            let kinds = t["kinds"]
                .as_array()
                .filter(|k| !k.is_empty())
                .map_or("-".into(), |k| {
                    k.iter().map(cell).collect::<Vec<_>>().join(",")
                });
            let expires = match (&t["expires_at"], t["expired"] == true) {
                (Value::Null, _) => "never".to_string(),
                (v, true) => format!("{} (expired)", cell(v)),
                (v, false) => cell(v),
            };
            vec![
                cell(&t["name"]),
                cell(&t["role"]),
                kinds,
                age(&t["created_at"]),
                expires,
                age(&t["last_used_at"]),
            ]
        })
        .collect();
    table(
        &["NAME", "ROLE", "KINDS", "AGE", "EXPIRES", "LAST USED"],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_parse_with_units() {
        assert_eq!(parse_lifetime("3600"), Ok(3600));
        assert_eq!(parse_lifetime("90m"), Ok(5400));
        assert_eq!(parse_lifetime("30d"), Ok(30 * 86400));
        assert!(parse_lifetime("0").is_err());
        assert!(parse_lifetime("1w").is_err());
        assert!(parse_lifetime("x").is_err());
    }

    #[test]
    fn the_list_never_has_a_secret_column() {
        let body = json!({"items": [{"name": "ci", "role": "worker", "kinds": ["net-*"],
            "created_at": "2026-01-01T00:00:00Z", "expires_at": null, "expired": false,
            "last_used_at": null}]});
        let t = render(&body);
        assert!(t.starts_with("NAME"), "{t}");
        assert!(
            t.contains("ci") && t.contains("net-*") && t.contains("never"),
            "{t}"
        );
    }
}
