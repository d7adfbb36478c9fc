//! `conctl render` against reality (issue 45): for the datadriven example's BOMs, the
//! children and edges `conctl render` prints with no server are exactly those the running
//! system stores when the real stdworker composes the same root — the Starlark bundle
//! (`starbom`, given as a directory) and the CEL graph (`celbom`). The leaves have no worker,
//! so no upstream reports a status and no value flow is substituted on either side; a second
//! render with `--observed` shows the flows substituted as the engine would.

mod common;

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    time::Duration,
};

use common::{Converge, Stdworker, manifest_dir, scratch_dir, wait_for};
use converge_testkit::{Method, converge_bin};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

fn example(rel: &str) -> PathBuf {
    Path::new(&manifest_dir()).join("../examples").join(rel)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Runs `conctl render -o json` with `args`; its JSON answer.
fn render(args: &[&str]) -> Value {
    let bin = converge_bin();
    let out = std::process::Command::new(bin.with_file_name("conctl"))
        .args(["render", "-o", "json"])
        .args(args)
        .env(
            "CONVERGE_STARLARK_BIN",
            bin.with_file_name("converge-starlark-compose"),
        )
        .output()
        .expect("run conctl render");
    assert!(
        out.status.success(),
        "conctl render {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("conctl render -o json prints JSON")
}

/// A child as both sides name it: (kind, name, spec, labels).
type Child = (String, String, String, String);

fn child_of(v: &Value) -> Child {
    let labels = if v["labels"].is_null() {
        json!({})
    } else {
        v["labels"].clone()
    };
    (
        v["kind"].as_str().unwrap().to_string(),
        v["name"].as_str().unwrap().to_string(),
        v["spec"].to_string(),
        labels.to_string(),
    )
}

fn rendered_children(r: &Value) -> BTreeSet<Child> {
    r["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(child_of)
        .collect()
}

fn rendered_edges(r: &Value) -> BTreeSet<(String, String)> {
    let at = |e: &Value| {
        format!(
            "{}/{}",
            e["kind"].as_str().unwrap(),
            e["name"].as_str().unwrap()
        )
    };
    r["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (at(&e["from"]), at(&e["to"])))
        .collect()
}

/// The stored children of `kind/name` (full reads, for spec and labels), once there are
/// `want` of them.
async fn stored_children(c: &Converge, kind: &str, name: &str, want: usize) -> BTreeSet<Child> {
    let names: Vec<(String, String)> = wait_for(T, "the composite's children", || async {
        let (s, v) = c
            .call(
                Method::GET,
                &format!("resources/{kind}/{name}/children?limit=500"),
                None,
            )
            .await;
        let items = v["items"].as_array().or(v["resources"].as_array())?.clone();
        (s == 200 && items.len() == want).then(|| {
            items
                .iter()
                .map(|i| {
                    (
                        i["kind"].as_str().unwrap().into(),
                        i["name"].as_str().unwrap().into(),
                    )
                })
                .collect()
        })
    })
    .await;
    let mut out = BTreeSet::new();
    for (k, n) in names {
        let full = c.get(&k, &n).await.expect("a stored child");
        out.insert(child_of(&full));
    }
    out
}

/// The stored edges among `children`, from each child's dependencies.
async fn stored_edges(c: &Converge, children: &BTreeSet<Child>) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (k, n, _, _) in children {
        let (s, v) = c
            .call(
                Method::GET,
                &format!("resources/{k}/{n}/dependencies"),
                None,
            )
            .await;
        assert_eq!(s, 200, "dependencies of {k}/{n}: {v}");
        for d in v["dependencies"].as_array().unwrap() {
            out.insert((
                format!("{k}/{n}"),
                format!(
                    "{}/{}",
                    d["kind"].as_str().unwrap(),
                    d["name"].as_str().unwrap()
                ),
            ));
        }
    }
    out
}

/// Asserts that render `r` of the root at `root_path` (of `kind`) has `n` children, and that
/// they and their edges are exactly what the running system stored for that root.
async fn same_as_stored(c: &Converge, kind: &str, root_path: &Path, r: &Value, n: usize) {
    let want = rendered_children(r);
    assert_eq!(want.len(), n, "{kind}: rendered children");
    let root = read_json(root_path);
    let got = stored_children(c, kind, root["name"].as_str().unwrap(), n).await;
    assert_eq!(got, want, "{kind}: stored children differ from the render");
    assert_eq!(
        stored_edges(c, &got).await,
        rendered_edges(r),
        "{kind}: stored edges differ from the render"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn render_prints_exactly_what_the_running_system_composes() {
    let c = Converge::start().await;
    for k in ["account", "vpc", "tgw", "route"] {
        c.apply_manifest(&read_json(&example(&format!("classic/manifests/{k}.json"))))
            .await;
    }
    for k in ["starbom", "celbom", "celteam"] {
        c.apply_manifest(&read_json(&example(&format!(
            "datadriven/manifests/{k}.json"
        ))))
        .await;
    }
    let star_cfg = example("datadriven/starlark-providerconfig.json");
    let bundle_dir = example("datadriven/starlark");
    let bundle = converge_starlark::pack_dir(&bundle_dir, 100).expect("pack the bundle");
    let cfg = read_json(&star_cfg);
    c.put_config_bundle(
        "starbom-default",
        "starbom",
        true,
        cfg["spec"].clone(),
        &bundle,
    )
    .await;
    for k in ["celbom", "celteam"] {
        let cfg = read_json(&example(&format!("datadriven/cel/{k}-providerconfig.json")));
        c.put_config(&format!("{k}-default"), k, true, cfg["spec"].clone())
            .await;
    }
    let _w = Stdworker::start_env(
        &c.broker,
        &[
            ("STDWORKER_STARLARK_KINDS", "starbom"),
            ("STDWORKER_CEL_KINDS", "celbom,celteam"),
        ],
    );
    let star_root = example("datadriven/star-bom.json");
    let cel_root = example("datadriven/cel-bom.json");
    c.apply_body(&read_json(&star_root)).await;
    c.apply_body(&read_json(&cel_root)).await;

    // Starlark, the bundle given as a directory.
    let star_args = [
        "-f",
        star_root.to_str().unwrap(),
        "--config",
        star_cfg.to_str().unwrap(),
        "--bundle",
        bundle_dir.to_str().unwrap(),
    ];
    let r = render(&star_args);
    same_as_stored(&c, "starbom", &star_root, &r, 24).await;

    // CEL: celbom composes one celteam per team.
    let cel_cfg = example("datadriven/cel/celbom-providerconfig.json");
    let r = render(&[
        "-f",
        cel_root.to_str().unwrap(),
        "--config",
        cel_cfg.to_str().unwrap(),
    ]);
    same_as_stored(&c, "celbom", &cel_root, &r, 6).await;

    // --observed: an account's status flows into its vpc's spec, as the engine's flow does.
    let dir = scratch_dir("render-observed");
    let observed = dir.join("observed.json");
    let star = read_json(&star_root);
    let team = format!(
        "{}-{}",
        star["spec"]["functional_domains"][0]["name"]
            .as_str()
            .unwrap(),
        star["spec"]["functional_domains"][0]["teams"][0]
            .as_str()
            .unwrap()
    );
    std::fs::write(
        &observed,
        json!({format!("account/{team}-account"): {"account_id": "acct-42"}}).to_string(),
    )
    .unwrap();
    let r = render(&[&star_args[..], &["--observed", observed.to_str().unwrap()]].concat());
    let vpc = r["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|ch| ch["name"] == format!("{team}-vpc"))
        .expect("the team's vpc");
    assert_eq!(vpc["spec"]["account_id"], "acct-42", "{vpc}");
    let _ = std::fs::remove_dir_all(dir);
    c.stop().await;
}
