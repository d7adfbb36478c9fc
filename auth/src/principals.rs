//! The `AUTH_FILE` format: who the principals are, their roles, and the kinds a worker may
//! serve. Parsing is strict (an unknown field, a duplicate name or a malformed hash is an
//! error naming the entry), because a typo in an access list must never widen access.

use std::{collections::HashSet, fmt};

use serde::Deserialize;

/// What a principal may do. `Viewer < Operator < Admin` for the HTTP API; `Worker` stands
/// apart: it speaks only the WorkerService, for the kinds its globs match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads everything the API shows.
    Viewer,
    /// Also applies and deletes resources, runs operations, reconcile, quarantine, rollback,
    /// and edits reactor bindings.
    Operator,
    /// Also applies kinds, kind configs and provider configs.
    Admin,
    /// Speaks only the WorkerService.
    Worker,
}

impl Role {
    /// The role's name as written in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
            Role::Worker => "worker",
        }
    }

    /// Whether this role may make an HTTP API call that needs `needed` (one of viewer,
    /// operator, admin). A worker may make none.
    pub fn allows(self, needed: Role) -> bool {
        let rank = |r: Role| match r {
            Role::Viewer => Some(1),
            Role::Operator => Some(2),
            Role::Admin => Some(3),
            Role::Worker => None,
        };
        matches!((rank(self), rank(needed)), (Some(have), Some(need)) if have >= need)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "viewer" => Ok(Role::Viewer),
            "operator" => Ok(Role::Operator),
            "admin" => Ok(Role::Admin),
            "worker" => Ok(Role::Worker),
            o => Err(format!(
                "{o:?} is not a role (viewer, operator, admin, worker)"
            )),
        }
    }
}

/// One authenticated identity.
#[derive(Clone, PartialEq, Eq)]
pub struct Principal {
    /// Display name (recorded as the actor of what it does).
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// For workers: globs of the kinds it may serve (`*` matches any run of characters).
    pub kinds: Vec<String>,
    /// The database row of a token minted through the API (`None` for an `AUTH_FILE`
    /// principal). Part of the identity: a revoked name minted again is a new principal, so
    /// a stream opened with the old token does not survive the new one.
    pub token_id: Option<i64>,
    /// When the credential stops authenticating, for a principal that is in no list: one
    /// an OIDC token stands for (its `exp`, see [`crate::oidc`]). `None` for every other.
    pub expires: Option<std::time::SystemTime>,
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name, self.role)
    }
}

impl Principal {
    /// Whether this principal may serve (or read the provider config of) `kind`.
    pub fn may_serve(&self, kind: &str) -> bool {
        self.role == Role::Worker && self.kinds.iter().any(|g| glob_match(g, kind))
    }
}

/// `*` matches any run of characters (also none); every other character matches itself.
pub fn glob_match(glob: &str, text: &str) -> bool {
    let (g, t) = (glob.as_bytes(), text.as_bytes());
    // Iterative match with one backtrack point: linear in practice, no recursion.
    let (mut gi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if gi < g.len() && g[gi] == b'*' {
            star = Some((gi, ti));
            gi += 1;
        } else if gi < g.len() && g[gi] == t[ti] {
            gi += 1;
            ti += 1;
        } else if let Some((sg, st)) = star {
            gi = sg + 1;
            ti = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|&c| c == b'*')
}

/// An `AUTH_FILE` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    role: Role,
    #[serde(default)]
    token_sha256: Option<String>,
    #[serde(default)]
    spiffe_id: Option<String>,
    #[serde(default)]
    kinds: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    principals: Vec<Entry>,
}

/// A principal with the credentials that identify it.
#[derive(Debug, Clone)]
pub struct Credentialed {
    /// Who.
    pub principal: Principal,
    /// SHA-256 of its bearer token, if it has one.
    pub token_sha256: Option<[u8; 32]>,
    /// The SPIFFE ID of its client certificate, if it authenticates with mTLS.
    pub spiffe_id: Option<String>,
}

/// Why an `AUTH_FILE` was refused.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Not YAML/JSON of the expected shape.
    #[error(
        "not a principals file ({0}); expected `principals: [{{name, role, token_sha256 | spiffe_id, kinds?}}]`"
    )]
    Syntax(String),
    /// One entry is wrong.
    #[error("principals[{index}] ({name:?}): {reason}")]
    Entry {
        /// Position in the list.
        index: usize,
        /// Its name as written.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// The kinds a principal of `role` is given, checked the one way both sources (`AUTH_FILE`
/// and tokens minted through the API) check them: a worker needs at least one non-empty
/// glob, every other role none.
pub fn check_kinds(role: Role, kinds: Option<Vec<String>>) -> Result<Vec<String>, String> {
    match (role, kinds) {
        (Role::Worker, Some(k)) if !k.is_empty() => {
            if let Some(bad) = k.iter().find(|g| g.trim().is_empty()) {
                return Err(format!("kinds has an empty glob {bad:?}"));
            }
            Ok(k)
        }
        (Role::Worker, _) => {
            Err("a worker needs kinds: the globs of the kinds it may serve (e.g. [\"*\"])".into())
        }
        (role, Some(_)) => Err(format!("kinds applies to role worker only, not {role}")),
        (_, None) => Ok(Vec::new()),
    }
}

/// Parses an `AUTH_FILE` (YAML, or JSON, which is YAML too).
pub fn parse(text: &str) -> Result<Vec<Credentialed>, ParseError> {
    let file: File = serde_yaml::from_str(text).map_err(|e| ParseError::Syntax(e.to_string()))?;
    let mut names = HashSet::new();
    let mut hashes = HashSet::new();
    let mut spiffes = HashSet::new();
    let mut out = Vec::with_capacity(file.principals.len());
    for (index, e) in file.principals.into_iter().enumerate() {
        let fail = |reason: String| ParseError::Entry {
            index,
            name: e.name.clone(),
            reason,
        };
        if e.name.trim().is_empty() || e.name.len() > 128 {
            return Err(fail("name must be 1-128 characters".into()));
        }
        if e.name.starts_with(crate::oidc::NAME_PREFIX) {
            return Err(fail(format!(
                "names starting with {:?} are reserved for people signed in through OIDC",
                crate::oidc::NAME_PREFIX
            )));
        }
        if !names.insert(e.name.clone()) {
            return Err(fail("a principal of this name is listed earlier".into()));
        }
        let token_sha256 = match &e.token_sha256 {
            None => None,
            Some(h) => {
                let mut out = [0u8; 32];
                hex::decode_to_slice(h.trim().to_ascii_lowercase(), &mut out).map_err(|_| {
                    fail("token_sha256 must be 64 hex digits (the SHA-256 of the token)".into())
                })?;
                if !hashes.insert(out) {
                    return Err(fail(
                        "token_sha256 is the same as an earlier entry's".into(),
                    ));
                }
                Some(out)
            }
        };
        if let Some(s) = &e.spiffe_id {
            if !s.starts_with("spiffe://") || s.len() <= "spiffe://".len() {
                return Err(fail(format!("spiffe_id {s:?} must start with spiffe://")));
            }
            if !spiffes.insert(s.clone()) {
                return Err(fail("spiffe_id is the same as an earlier entry's".into()));
            }
        }
        if token_sha256.is_none() && e.spiffe_id.is_none() {
            return Err(fail(
                "needs token_sha256 or spiffe_id (or both) to be identifiable".into(),
            ));
        }
        let kinds = check_kinds(e.role, e.kinds).map_err(fail)?;
        out.push(Credentialed {
            principal: Principal {
                name: e.name,
                role: e.role,
                kinds,
                token_id: None,
                expires: None,
            },
            token_sha256,
            spiffe_id: e.spiffe_id,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_documented() {
        assert!(glob_match("*", "vpc"));
        assert!(glob_match("vpc", "vpc"));
        assert!(!glob_match("vpc", "vpcs"));
        assert!(glob_match("net-*", "net-a"));
        assert!(glob_match("net-*", "net-"));
        assert!(!glob_match("net-*", "ne"));
        assert!(glob_match("*-db", "pg-db"));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
        assert!(glob_match("**", ""));
    }

    #[test]
    fn roles_rank_for_http_and_workers_get_none() {
        assert!(Role::Admin.allows(Role::Operator));
        assert!(Role::Operator.allows(Role::Viewer));
        assert!(!Role::Viewer.allows(Role::Operator));
        assert!(!Role::Operator.allows(Role::Admin));
        assert!(!Role::Worker.allows(Role::Viewer));
    }

    const H: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn parses_yaml_and_json() {
        let y = format!(
            "principals:\n  - {{name: ops, role: admin, token_sha256: \"{H}\"}}\n  - {{name: w, role: worker, spiffe_id: \"spiffe://e.org/w\", kinds: [\"net-*\"]}}\n"
        );
        let p = parse(&y).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].principal.role, Role::Admin);
        assert!(p[1].principal.may_serve("net-a"));
        assert!(!p[1].principal.may_serve("vpc"));
        let j =
            format!(r#"{{"principals":[{{"name":"a","role":"viewer","token_sha256":"{H}"}}]}}"#);
        assert_eq!(parse(&j).unwrap()[0].principal.name, "a");
    }

    #[test]
    fn refuses_what_would_widen_access_or_confuse() {
        let cases = [
            (
                "principals: [{name: a, role: root, token_sha256: x}]",
                "root",
            ),
            (
                &*format!(
                    "principals: [{{name: a, role: viewer, token_sha256: \"{H}\", kind: [x]}}]"
                ),
                "unknown field",
            ),
            (
                "principals: [{name: a, role: viewer, token_sha256: abc}]",
                "64 hex",
            ),
            (
                "principals: [{name: a, role: viewer}]",
                "token_sha256 or spiffe_id",
            ),
            (
                &*format!("principals: [{{name: a, role: worker, token_sha256: \"{H}\"}}]"),
                "needs kinds",
            ),
            (
                &*format!(
                    "principals: [{{name: a, role: admin, token_sha256: \"{H}\", kinds: [x]}}]"
                ),
                "worker only",
            ),
            (
                &*format!(
                    "principals: [{{name: a, role: admin, token_sha256: \"{H}\"}}, {{name: a, role: viewer, spiffe_id: \"spiffe://x/y\"}}]"
                ),
                "listed earlier",
            ),
            (
                &*format!(
                    "principals: [{{name: a, role: admin, token_sha256: \"{H}\"}}, {{name: b, role: viewer, token_sha256: \"{H}\"}}]"
                ),
                "same as an earlier",
            ),
            (
                "principals: [{name: a, role: viewer, spiffe_id: \"http://x\"}]",
                "spiffe://",
            ),
        ];
        for (text, want) in cases {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
