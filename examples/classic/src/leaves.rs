//! The four leaves (`account`, `vpc`, `tgw`, `route`): each pretends to provision one cloud
//! resource and reports a deterministic id plus its inputs in status, and to tear it down
//! when deleted (see [`crate::teardown`]).
//!
//! Inputs that arrive by value flow (`vpc.account_id`, `tgw.vpc_id`, `route.tgw_id`,
//! `route.vpc_id`) are `null` until the upstream has synced. The engine schedules a dependent
//! only once its upstreams are synced and their values substituted, so a `null` here means the
//! ordering broke: the leaf answers with a transient "waiting for <field>" error instead of
//! provisioning against a missing input.

use std::time::Duration;

use converge_sdk::{
    Condition, HandlerError, KindVersion, Outcome, Provider, ReactionRequest, Stage,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{ids::fake_id, teardown::Teardown};

/// Where every team's route points through its transit gateway (the corporate supernet).
pub const ROUTE_DESTINATION: &str = "10.0.0.0/8";

/// How a leaf's `spec.fail` makes every attempt fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// A terminal failure: the leaf goes Failed and its composite Degraded, until the spec
    /// changes (or an operator quarantines it).
    Terminal,
    /// A transient failure: retried with backoff.
    Transient,
}

impl FailMode {
    /// The wire spelling (`terminal` or `transient`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailMode::Terminal => "terminal",
            FailMode::Transient => "transient",
        }
    }
}

/// The `account` kind's spec: the account a team's network lives in.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountSpec {
    /// The functional domain the team belongs to.
    pub domain: String,
    /// The team.
    pub team: String,
    /// The cloud region.
    pub region: String,
    /// Fail every attempt on purpose.
    #[serde(default)]
    pub fail: Option<FailMode>,
}

/// The `vpc` kind's spec.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VpcSpec {
    /// The owning account (flows from `account.status.account_id`).
    pub account_id: Option<String>,
    /// The VPC's CIDR block.
    pub cidr: String,
    /// The cloud region.
    pub region: String,
    /// Fail every attempt on purpose.
    #[serde(default)]
    pub fail: Option<FailMode>,
}

/// The `tgw` kind's spec: a transit gateway attached to the team's VPC.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TgwSpec {
    /// The attached VPC (flows from `vpc.status.vpc_id`).
    pub vpc_id: Option<String>,
    /// The gateway's private BGP ASN.
    pub asn: u32,
    /// The cloud region.
    pub region: String,
    /// Fail every attempt on purpose.
    #[serde(default)]
    pub fail: Option<FailMode>,
}

/// The `route` kind's spec: a route in the team's VPC through its transit gateway.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// The gateway routed through (flows from `tgw.status.tgw_id`).
    pub tgw_id: Option<String>,
    /// The VPC whose route table gets the route (flows from `vpc.status.vpc_id`).
    pub vpc_id: Option<String>,
    /// The destination CIDR.
    pub destination: String,
    /// Fail every attempt on purpose.
    #[serde(default)]
    pub fail: Option<FailMode>,
}

/// Serves kind `account` version 1.
#[derive(Debug, Default, Clone)]
pub struct Account {
    /// Simulated provisioning latency.
    pub latency: Duration,
}

/// Serves kind `vpc` version 1.
#[derive(Debug, Default, Clone)]
pub struct Vpc {
    /// Simulated provisioning latency.
    pub latency: Duration,
}

/// Serves kind `tgw` version 1.
#[derive(Debug, Default, Clone)]
pub struct Tgw {
    /// Simulated provisioning latency.
    pub latency: Duration,
}

/// Serves kind `route` version 1.
#[derive(Debug, Default, Clone)]
pub struct Route {
    /// Simulated provisioning latency.
    pub latency: Duration,
}

impl Provider for Account {
    fn kind(&self) -> KindVersion {
        KindVersion::new("account", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.stage == Stage::Delete {
            return Teardown::global().run(&req).await;
        }
        let spec: AccountSpec = req.spec()?;
        prelude(&req, self.latency, spec.fail).await?;
        let name = req.resource.name.as_str();
        let id = fake_id("acct", &[name, &spec.domain, &spec.team, &spec.region]);
        Ok(provisioned(
            json!({"account_id": id, "domain": spec.domain, "team": spec.team, "region": spec.region}),
            format!("account {id} for team {} in {}", spec.team, spec.region),
        ))
    }
}

impl Provider for Vpc {
    fn kind(&self) -> KindVersion {
        KindVersion::new("vpc", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.stage == Stage::Delete {
            return Teardown::global().run(&req).await;
        }
        let spec: VpcSpec = req.spec()?;
        prelude(&req, self.latency, spec.fail).await?;
        let account_id = flowed("account_id", spec.account_id.as_deref())?;
        let name = req.resource.name.as_str();
        let id = fake_id("vpc", &[name, account_id, &spec.cidr, &spec.region]);
        Ok(provisioned(
            json!({"vpc_id": id, "account_id": account_id, "cidr": spec.cidr, "region": spec.region}),
            format!("vpc {id} ({}) in account {account_id}", spec.cidr),
        ))
    }
}

impl Provider for Tgw {
    fn kind(&self) -> KindVersion {
        KindVersion::new("tgw", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.stage == Stage::Delete {
            return Teardown::global().run(&req).await;
        }
        let spec: TgwSpec = req.spec()?;
        prelude(&req, self.latency, spec.fail).await?;
        let vpc_id = flowed("vpc_id", spec.vpc_id.as_deref())?;
        let name = req.resource.name.as_str();
        let asn = spec.asn.to_string();
        let id = fake_id("tgw", &[name, vpc_id, &asn, &spec.region]);
        Ok(provisioned(
            json!({"tgw_id": id, "vpc_id": vpc_id, "asn": spec.asn, "region": spec.region}),
            format!("tgw {id} (asn {asn}) attached to {vpc_id}"),
        ))
    }
}

impl Provider for Route {
    fn kind(&self) -> KindVersion {
        KindVersion::new("route", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.stage == Stage::Delete {
            return Teardown::global().run(&req).await;
        }
        let spec: RouteSpec = req.spec()?;
        prelude(&req, self.latency, spec.fail).await?;
        let tgw_id = flowed("tgw_id", spec.tgw_id.as_deref())?;
        let vpc_id = flowed("vpc_id", spec.vpc_id.as_deref())?;
        let name = req.resource.name.as_str();
        let id = fake_id("route", &[name, tgw_id, vpc_id, &spec.destination]);
        Ok(provisioned(
            json!({"route_id": id, "tgw_id": tgw_id, "vpc_id": vpc_id, "destination": spec.destination}),
            format!("route {id}: {} via {tgw_id} in {vpc_id}", spec.destination),
        ))
    }
}

/// What every leaf does before provisioning: refuse a stage it does not serve, wait out the
/// simulated latency (cut short by cancellation), then honour the fail switch.
async fn prelude(
    req: &ReactionRequest,
    latency: Duration,
    fail: Option<FailMode>,
) -> Result<(), HandlerError> {
    if req.stage != Stage::Work {
        return Err(HandlerError::terminal(format!(
            "{} serves only the work stage, not {:?}",
            req.kind, req.stage
        )));
    }
    if !latency.is_zero() {
        tokio::select! {
            () = tokio::time::sleep(latency) => {}
            () = req.cancel.cancelled() => {
                return Err(HandlerError::transient("cancelled while provisioning"));
            }
        }
    }
    match fail {
        Some(FailMode::Terminal) => Err(HandlerError::terminal(
            "spec.fail asks for a terminal failure",
        )),
        Some(FailMode::Transient) => Err(HandlerError::transient(
            "spec.fail asks for a transient failure",
        )),
        None => Ok(()),
    }
}

/// A value-flowed input, or a transient error while it has not arrived.
fn flowed<'a>(field: &str, value: Option<&'a str>) -> Result<&'a str, HandlerError> {
    match value {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(HandlerError::transient(format!("waiting for {field}"))),
    }
}

fn provisioned(status: serde_json::Value, message: String) -> Outcome {
    Outcome::status(status).with_condition(Condition::ready(true, "Provisioned", message))
}
