//! The `classicbom` composite: its composer expands a bill of materials into four leaves per
//! (functional domain, team) wired by dependency edges with value flows, and its rollup
//! summarises how many of them are ready.
//!
//! Per team the composer emits (arrows point at the dependency, values flow against them):
//!
//! ```text
//! account ◄── vpc ◄── tgw ◄── route
//!              ▲                │
//!              └────────────────┘
//! ```
//!
//! `vpc.account_id ← account.account_id`, `tgw.vpc_id ← vpc.vpc_id`,
//! `route.tgw_id ← tgw.tgw_id`, `route.vpc_id ← vpc.vpc_id`.

use std::collections::{BTreeMap, BTreeSet};

use converge_sdk::{
    ChildSpec, Condition, DepEdge, HandlerError, KindVersion, Outcome, Provider, ReactionRequest,
    Resource, ResourceRef, Stage, ValueFlow,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::leaves::{FailMode, ROUTE_DESTINATION};

/// The most teams one BOM may hold: team `i` gets the VPC CIDR `10.<i>.0.0/16`.
pub const MAX_TEAMS: usize = 256;

/// The first private ASN; team `i`'s transit gateway gets `FIRST_ASN + i`.
const FIRST_ASN: u32 = 64_512;

/// How many not-ready children the rollup's Ready=False message names.
const NAMED_NOT_READY: usize = 5;

/// The `classicbom` kind's spec.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BomSpec {
    /// The functional domains, each with its teams; their order fixes each team's index
    /// (and so its CIDR and ASN).
    pub functional_domains: Vec<FunctionalDomain>,
    /// The region every leaf is provisioned in.
    pub region: String,
    /// Child name → failure to inject into that child's spec (for demos).
    #[serde(default)]
    pub fail: BTreeMap<String, FailMode>,
}

/// One functional domain of a BOM.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionalDomain {
    /// The domain's name (a DNS label).
    pub name: String,
    /// Its teams (DNS labels).
    pub teams: Vec<String>,
}

/// Serves kind `classicbom` version 1 (the `compose` and `rollup` reactions).
#[derive(Debug, Default, Clone, Copy)]
pub struct ClassicBom;

impl Provider for ClassicBom {
    fn kind(&self) -> KindVersion {
        KindVersion::new("classicbom", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        match req.stage {
            Stage::Compose => compose(&req.resource.name, &req.spec()?),
            // Per-kind ready counts and the not-ready children's phases are more than the
            // request's summary holds, so the rollup pages through the subtree.
            Stage::Rollup => Ok(rollup(&req.read_descendants().await?)),
            other => Err(HandlerError::terminal(format!(
                "classicbom serves only the compose and rollup stages, not {other:?}"
            ))),
        }
    }
}

/// The desired children and edges of BOM `bom`. Every check fails terminally: a BOM that
/// cannot be expanded needs a spec change, and returning no children would prune them all.
fn compose(bom: &str, spec: &BomSpec) -> Result<Outcome, HandlerError> {
    if spec.region.is_empty() {
        return Err(HandlerError::terminal("spec.region must not be empty"));
    }
    let mut out = Outcome::default();
    let mut teams = BTreeSet::new();
    for domain in &spec.functional_domains {
        check_label("functional domain", &domain.name)?;
        for team in &domain.teams {
            check_label("team", team)?;
            let index = teams.len();
            if index == MAX_TEAMS {
                return Err(HandlerError::terminal(format!(
                    "a BOM holds at most {MAX_TEAMS} teams (one /16 each in 10.0.0.0/8)"
                )));
            }
            let base = format!("{}-{team}", domain.name);
            if !teams.insert(base.clone()) {
                return Err(HandlerError::terminal(format!(
                    "team {team:?} of functional domain {:?} yields children named {base}-*, which another team already has",
                    domain.name
                )));
            }
            let ctx = TeamCtx {
                bom,
                domain: &domain.name,
                team,
                base: &base,
                fail: &spec.fail,
            };
            out = compose_team(out, &ctx, index, &spec.region);
        }
    }
    let unknown: Vec<&str> = spec
        .fail
        .keys()
        .filter(|k| !out.children.iter().any(|c| &c.name == *k))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(HandlerError::terminal(format!(
            "spec.fail names children this BOM does not have: {}",
            unknown.join(", ")
        )));
    }
    let children = out.children.len();
    Ok(out
        .with_status(json!({"teams": teams.len(), "children": children}))
        .with_condition(Condition::new(
            "Composed",
            "True",
            "ChildrenComposed",
            format!("{children} children for {} teams", teams.len()),
        )))
}

/// What one team's leaves share.
struct TeamCtx<'a> {
    bom: &'a str,
    domain: &'a str,
    team: &'a str,
    base: &'a str,
    fail: &'a BTreeMap<String, FailMode>,
}

impl TeamCtx<'_> {
    fn name(&self, kind: &str) -> String {
        format!("{}-{kind}", self.base)
    }

    fn child(&self, kind: &str, mut spec: Value) -> ChildSpec {
        let name = self.name(kind);
        if let (Some(mode), Some(obj)) = (self.fail.get(&name), spec.as_object_mut()) {
            obj.insert("fail".to_string(), json!(mode.as_str()));
        }
        ChildSpec::new(kind, 1, name, spec)
            .with_label("fd", self.domain)
            .with_label("team", self.team)
            .with_label("bom", self.bom)
    }

    fn edge(&self, dependent: &str, dependency: &str, fields: &[&str]) -> DepEdge {
        fields.iter().fold(
            DepEdge::new(
                ResourceRef::new(dependent, self.name(dependent)),
                ResourceRef::new(dependency, self.name(dependency)),
            ),
            |edge, field| {
                let ptr = format!("/{field}");
                edge.with_value(ValueFlow::new(ptr.clone(), ptr))
            },
        )
    }
}

fn compose_team(out: Outcome, t: &TeamCtx<'_>, index: usize, region: &str) -> Outcome {
    let cidr = format!("10.{index}.0.0/16");
    let asn = FIRST_ASN + u32::try_from(index).unwrap_or(0);
    out.with_child(t.child(
        "account",
        json!({"domain": t.domain, "team": t.team, "region": region}),
    ))
    .with_child(t.child(
        "vpc",
        json!({"account_id": null, "cidr": cidr, "region": region}),
    ))
    .with_child(t.child("tgw", json!({"vpc_id": null, "asn": asn, "region": region})))
    .with_child(t.child(
        "route",
        json!({"tgw_id": null, "vpc_id": null, "destination": ROUTE_DESTINATION}),
    ))
    .with_edge(t.edge("vpc", "account", &["account_id"]))
    .with_edge(t.edge("tgw", "vpc", &["vpc_id"]))
    .with_edge(t.edge("route", "tgw", &["tgw_id"]))
    .with_edge(t.edge("route", "vpc", &["vpc_id"]))
}

/// A DNS label: 1-63 lowercase letters, digits and inner hyphens (the spec schema's pattern;
/// checked again here because child names are built from it).
fn check_label(what: &str, s: &str) -> Result<(), HandlerError> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(HandlerError::terminal(format!(
            "{what} name {s:?} must be 1-63 lowercase letters, digits or inner hyphens"
        )))
    }
}

/// Counts ready descendants, per kind too; Ready=False names the first few that are not.
fn rollup(descendants: &[Resource]) -> Outcome {
    let mut by_kind: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut not_ready: Vec<&Resource> = Vec::new();
    for d in descendants {
        let slot = by_kind.entry(d.kind.as_str()).or_default();
        slot.0 += 1;
        if d.is_ready {
            slot.1 += 1;
        } else {
            not_ready.push(d);
        }
    }
    let (n, r) = (descendants.len(), descendants.len() - not_ready.len());
    let by_kind: serde_json::Map<String, Value> = by_kind
        .into_iter()
        .map(|(k, (c, r))| (k.to_string(), json!({"children": c, "ready": r})))
        .collect();
    let status = json!({"children": n, "ready": r, "by_kind": by_kind});
    let condition = if not_ready.is_empty() {
        Condition::ready(true, "AllChildrenReady", format!("{r}/{n} children ready"))
    } else {
        not_ready.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
        let named: Vec<String> = not_ready
            .iter()
            .take(NAMED_NOT_READY)
            .map(|d| format!("{}/{} ({})", d.kind, d.name, d.phase))
            .collect();
        let more = not_ready.len().saturating_sub(NAMED_NOT_READY);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        Condition::ready(
            false,
            "ChildrenNotReady",
            format!(
                "{r}/{n} children ready; not ready: {}{more}",
                named.join(", ")
            ),
        )
    };
    Outcome::status(status).with_condition(condition)
}
