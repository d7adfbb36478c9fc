//! The composite benchmark: R roots, each composing chains of three leaves (a -> b -> c) with
//! value flows, so the run exercises compose, dependency ordering, flows and rollup. Figures:
//! time to every root Ready, reconciles/s, and rollup latency (last child synced -> root
//! Ready) per root, taken from the rows' own timestamps.

use converge_sdk::{
    ChildSpec, DepEdge, HandlerError, KindVersion, Outcome, Provider, ReactionRequest, ResourceRef,
    Stage, ValueFlow,
};
use serde_json::{Value, json};

/// Kind `benchbom`: composes `spec.chains` chains; rolls up a count.
pub struct BenchBom;

impl Provider for BenchBom {
    fn kind(&self) -> KindVersion {
        KindVersion::new("benchbom", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let spec: Value = req.spec()?;
        match req.stage {
            // Teardown (with --finalizers): nothing to release.
            Stage::Delete => Ok(Outcome::default()),
            Stage::Compose => {
                let chains = spec["chains"].as_u64().unwrap_or(1);
                let root = &req.resource.name;
                let mut out = Outcome::status(json!({"children": chains * 3}));
                for i in 0..chains {
                    let n = |l: &str| format!("{root}-c{i}-{l}");
                    out = out
                        .with_child(ChildSpec::new(
                            "benchlink",
                            1,
                            n("a"),
                            json!({"x": format!("seed-{i}")}),
                        ))
                        .with_child(ChildSpec::new("benchlink", 1, n("b"), json!({"x": null})))
                        .with_child(ChildSpec::new("benchlink", 1, n("c"), json!({"x": null})))
                        .with_edge(
                            DepEdge::new(
                                ResourceRef::new("benchlink", n("b")),
                                ResourceRef::new("benchlink", n("a")),
                            )
                            .with_value(ValueFlow::new("/x", "/x")),
                        )
                        .with_edge(
                            DepEdge::new(
                                ResourceRef::new("benchlink", n("c")),
                                ResourceRef::new("benchlink", n("b")),
                            )
                            .with_value(ValueFlow::new("/x", "/x")),
                        );
                }
                Ok(out)
            }
            // The summary form: the counts come with the task, no descendant is read.
            _ => {
                let s = req.summary.clone().unwrap_or_default();
                Ok(Outcome::status(
                    json!({"children": s.total, "ready": s.ready()}),
                ))
            }
        }
    }
}

/// Kind `benchlink`: reports its (flowed) input as status.
pub struct BenchLink;

impl Provider for BenchLink {
    fn kind(&self) -> KindVersion {
        KindVersion::new("benchlink", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.stage == Stage::Delete {
            return Ok(Outcome::default());
        }
        let spec: Value = req.spec()?;
        if spec["x"].is_null() {
            return Err(HandlerError::transient("x has not flowed in yet"));
        }
        Ok(Outcome::status(json!({"x": spec["x"]})))
    }
}

/// The two manifests; with `finalizers`, both kinds guard deletion with a teardown reaction
/// (each node then costs a STAGE_DELETE round trip when deleted).
pub fn manifests(finalizers: bool) -> [Value; 2] {
    let mut m = [
        json!({"kind": "benchbom", "kind_version": 1, "reactions": [
            {"name": "compose", "trigger": "specChange", "emits": ["children", "edges", "status"]},
            {"name": "rollup", "trigger": "childrenSettled", "emits": ["status"]}]}),
        json!({"kind": "benchlink", "kind_version": 1, "reactions": [
            {"name": "work", "trigger": "specChange", "emits": ["status"]}]}),
    ];
    if finalizers {
        for k in &mut m {
            k["finalizer_name"] = json!("bench/teardown");
            if let Some(r) = k["reactions"].as_array_mut() {
                r.push(json!({"name": "teardown", "trigger": "deleteRequested",
                              "finalizer": "bench/teardown", "emits": ["finalizer"]}));
            }
        }
    }
    m
}
