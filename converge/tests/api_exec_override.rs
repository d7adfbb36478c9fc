//! No command execution through data, the API half (issue 23 item 7), against the real
//! `converge`: when a kind's manifest declares `"provider": "exec"`, a config acting as a
//! resource's override may set only `settings`. The API refuses (422, naming the pointer) an
//! override config carrying `program`, `args`, `env` or `timeout_secs`, a resource naming
//! such a config, and a default config turned into one while resources name it; a manifest
//! newly declaring exec over such configs is a 409 naming them. A kind that declares no
//! provider keeps today's behaviour (stdworker refuses at run time), and the field is a
//! closed set.

mod common;

use common::Converge;
use reqwest::Method;
use serde_json::{Value, json};

fn manifest(kind: &str, provider: Option<&str>) -> Value {
    let mut m = json!({"kind": kind, "kind_version": 1,
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]});
    if let Some(p) = provider {
        m["provider"] = json!(p);
    }
    m
}

fn config(kind: &str, name: &str, default: bool, spec: Value) -> Value {
    json!({"name": name, "kind": kind, "kind_version": 1, "is_default": default, "spec": spec})
}

fn resource(kind: &str, name: &str, config_ref: &str) -> Value {
    json!({"kind": kind, "kind_version": 1, "name": name, "spec": {},
           "provider_config_ref": config_ref})
}

fn locations(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["location"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

async fn put_manifest(c: &Converge, m: &Value) -> (u16, Value) {
    let kind = m["kind"].as_str().unwrap();
    c.call(
        Method::PUT,
        &format!("kinds/{kind}/manifest"),
        Some(m.clone()),
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exec_kind_refuses_overrides_that_choose_what_runs() {
    let c = Converge::start(&[]).await;
    let pc = |body: Value| c.call(Method::POST, "providerconfigs", Some(body));

    // The field is optional and a closed set; a declared provider is stored and read back.
    let (s, body) = put_manifest(&c, &manifest("runner", Some("Exec"))).await;
    assert_eq!(s, 422, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("provider \"Exec\" is not one of exec, starlark, cel, wasm, sdk"),
        "{body}"
    );
    c.apply_manifest(&manifest("runner", Some("exec"))).await;
    c.apply_manifest(&manifest("plain", None)).await;
    let (s, m) = c.call(Method::GET, "kinds/runner/manifest", None).await;
    assert_eq!((s, &m["provider"]), (200, &json!("exec")), "{m}");
    let (_, m) = c.call(Method::GET, "kinds/plain/manifest", None).await;
    assert!(m.get("provider").is_none(), "{m}");

    // The default config chooses what runs.
    let (s, body) = pc(config(
        "runner",
        "runner-default",
        true,
        json!({"program": "/usr/bin/handler", "args": ["-v"], "env": {"A": "1"},
               "timeout_secs": 30, "settings": {"level": 1}}),
    ))
    .await;
    assert_eq!(s, 201, "{body}");

    // An override naming the program: 422 at /spec/program, nothing stored.
    let (s, body) = pc(config(
        "runner",
        "evil",
        false,
        json!({"program": "/bin/sh", "settings": {}}),
    ))
    .await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(locations(&body), ["/spec/program"], "{body}");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("may set only settings"),
        "{body}"
    );
    let (s, _) = c.call(Method::GET, "providerconfigs/evil", None).await;
    assert_eq!(s, 404, "a refused override is not stored");

    // Every forbidden field is named at its pointer, beside the config_schema's own errors.
    let (s, body) = pc(config(
        "runner",
        "evil",
        false,
        json!({"args": ["-c", "id"], "env": {"LD_PRELOAD": "/tmp/x.so"}, "timeout_secs": 0}),
    ))
    .await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(
        locations(&body),
        ["/spec/args", "/spec/env", "/spec/timeout_secs"],
        "{body}"
    );

    // Settings (and anything nested under them) are the override's to set.
    let (s, body) = pc(config(
        "runner",
        "tuned",
        false,
        json!({"settings": {"program": "not a field of the exec config", "level": 2}}),
    ))
    .await;
    assert_eq!(s, 201, "{body}");
    let (s, _, body) = c.apply(&resource("runner", "r1", "tuned")).await;
    assert_eq!(s, 201, "{body}");

    // The default named as an override would ride a task as one: refused at the reference.
    let (s, _, body) = c.apply(&resource("runner", "r2", "runner-default")).await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(locations(&body), ["/provider_config_ref"], "{body}");
    let msg = body["errors"][0]["message"].as_str().unwrap();
    for want in [
        "/spec/program",
        "/spec/args",
        "/spec/env",
        "/spec/timeout_secs",
    ] {
        assert!(msg.contains(want), "{want} missing from {msg}");
    }

    // An override in use cannot become a program-naming default: its resources would run it.
    let default_off = config(
        "runner",
        "runner-default",
        false,
        json!({"settings": {"level": 1}}),
    );
    let (s, body) = pc(default_off).await;
    assert_eq!(s, 200, "{body}");
    let (s, body) = pc(config(
        "runner",
        "tuned",
        true,
        json!({"program": "/bin/sh"}),
    ))
    .await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(locations(&body), ["/spec/program"], "{body}");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("named by 1 resource(s)"),
        "{body}"
    );

    // A kind that declares no provider: the API cannot tell, so the same override is stored
    // (stdworker refuses it when a task runs).
    let (s, body) = pc(config(
        "plain",
        "plain-override",
        false,
        json!({"program": "/bin/sh", "args": ["-c", "id"]}),
    ))
    .await;
    assert_eq!(s, 201, "{body}");
    let (s, _, body) = c.apply(&resource("plain", "p1", "plain-override")).await;
    assert_eq!(s, 201, "{body}");

    // Declaring exec over it now: 409 naming the config and its fields, nothing changed.
    let (s, body) = put_manifest(&c, &manifest("plain", Some("exec"))).await;
    assert_eq!(s, 409, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("\"plain-override\" sets program, args"),
        "{body}"
    );
    let (_, m) = c.call(Method::GET, "kinds/plain/manifest", None).await;
    assert!(
        m.get("provider").is_none(),
        "the refused manifest is not stored: {m}"
    );

    // Fixed, the declaration goes through, and a re-apply of the same manifest is a no-op.
    let (s, body) = pc(config(
        "plain",
        "plain-override",
        false,
        json!({"settings": {}}),
    ))
    .await;
    assert_eq!(s, 200, "{body}");
    let (s, body) = put_manifest(&c, &manifest("plain", Some("exec"))).await;
    assert_eq!(s, 200, "{body}");
    let (s, body) = put_manifest(&c, &manifest("plain", Some("exec"))).await;
    assert_eq!((s, &body["result"]), (200, &json!("unchanged")), "{body}");
    c.stop().await;
}
