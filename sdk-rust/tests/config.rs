//! `WorkerConfig::from_lookup` / `from_env`: defaults, accepted spellings, and loud errors
//! that name the variable at fault.

use std::{collections::HashMap, time::Duration};

use converge_sdk::{ConfigError, WorkerConfig};

fn parse(vars: &[(&str, &str)]) -> Result<WorkerConfig, ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    WorkerConfig::from_lookup(|name| Ok(map.get(name).cloned()))
}

#[test]
fn defaults_apply_when_only_the_broker_is_set() {
    let cfg = parse(&[("BROKER_ADDR", "http://127.0.0.1:9090")]).unwrap();
    assert_eq!(cfg.broker_addr, "http://127.0.0.1:9090");
    // A bare host:port is plaintext h2c, as in every SDK.
    let bare = parse(&[("BROKER_ADDR", "127.0.0.1:9090")]).unwrap();
    assert_eq!(bare.broker_addr, "http://127.0.0.1:9090");
    assert_eq!(cfg.max_parallel, 16);
    assert_eq!(cfg.drain_timeout, Duration::from_secs(50));
    assert_eq!(cfg.kinds, None);
    assert!(
        cfg.worker_name
            .ends_with(&format!("-{}", std::process::id()))
    );
    assert_eq!(cfg.heartbeat_every, Duration::from_secs(5));
    assert_eq!(cfg.readiness_poll, Duration::from_secs(2));
    assert_eq!(
        (cfg.reconnect_min, cfg.reconnect_max),
        (Duration::from_secs(1), Duration::from_secs(30))
    );
}

#[test]
fn every_variable_is_read() {
    let cfg = parse(&[
        ("BROKER_ADDR", "http://broker:9090"),
        ("WORKER_MAX_PARALLEL", "64"),
        ("WORKER_DRAIN_TIMEOUT", "2m"),
        ("WORKER_KINDS", "hello, vpc ,,"),
        ("WORKER_NAME", "w-1"),
    ])
    .unwrap();
    assert_eq!(cfg.max_parallel, 64);
    assert_eq!(cfg.drain_timeout, Duration::from_secs(120));
    assert_eq!(
        cfg.kinds,
        Some(vec!["hello".to_string(), "vpc".to_string()])
    );
    assert_eq!(cfg.worker_name, "w-1");
    for (v, want) in [
        ("500ms", Duration::from_millis(500)),
        ("50s", Duration::from_secs(50)),
        ("7", Duration::from_secs(7)),
    ] {
        let cfg = parse(&[("BROKER_ADDR", "http://b:1"), ("WORKER_DRAIN_TIMEOUT", v)]).unwrap();
        assert_eq!(cfg.drain_timeout, want, "{v}");
    }
}

#[test]
fn malformed_values_are_errors_naming_the_variable() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[], "BROKER_ADDR"),
        (&[("BROKER_ADDR", "ftp://b:9090")], "BROKER_ADDR"),
        (&[("BROKER_ADDR", "https://b:9090")], "BROKER_ADDR"),
        (
            &[
                ("BROKER_ADDR", "http://b:1"),
                ("WORKER_MAX_PARALLEL", "lots"),
            ],
            "WORKER_MAX_PARALLEL",
        ),
        (
            &[("BROKER_ADDR", "http://b:1"), ("WORKER_MAX_PARALLEL", "0")],
            "WORKER_MAX_PARALLEL",
        ),
        (
            &[("BROKER_ADDR", "http://b:1"), ("WORKER_MAX_PARALLEL", "-3")],
            "WORKER_MAX_PARALLEL",
        ),
        (
            &[
                ("BROKER_ADDR", "http://b:1"),
                ("WORKER_DRAIN_TIMEOUT", "5x"),
            ],
            "WORKER_DRAIN_TIMEOUT",
        ),
        (
            &[
                ("BROKER_ADDR", "http://b:1"),
                ("WORKER_DRAIN_TIMEOUT", "soon"),
            ],
            "WORKER_DRAIN_TIMEOUT",
        ),
        (
            &[("BROKER_ADDR", "http://b:1"), ("WORKER_KINDS", " , ")],
            "WORKER_KINDS",
        ),
    ];
    for (vars, var) in cases {
        let err = parse(vars).expect_err(var);
        assert_eq!(err.var(), *var, "{err}");
        assert!(
            err.to_string().contains(var),
            "message names the variable: {err}"
        );
    }
}

#[test]
fn lookup_errors_propagate() {
    let err = WorkerConfig::from_lookup(|name| {
        Err(ConfigError::NotUnicode {
            var: name.to_string(),
        })
    })
    .expect_err("not unicode");
    assert_eq!(err.var(), "BROKER_ADDR");
}
