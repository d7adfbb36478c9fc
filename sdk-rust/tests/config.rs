//! `WorkerConfig::from_lookup` / `from_env`: defaults, accepted spellings, broker lists, the
//! broker credentials (token, TLS files), and loud errors that name the variable at fault.

use std::{collections::HashMap, path::PathBuf, time::Duration};

use converge_sdk::{
    Compression, ConfigError, RECONNECT_CAP, Registry, WorkerConfig, WorkerError, WorkerToken,
};

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
    assert_eq!(cfg.broker_addrs, ["http://127.0.0.1:9090"]);
    // A bare host:port is plaintext h2c, as in every SDK.
    let bare = parse(&[("BROKER_ADDR", "127.0.0.1:9090")]).unwrap();
    assert_eq!(bare.broker_addrs, ["http://127.0.0.1:9090"]);
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
        (Duration::from_secs(1), Duration::from_secs(5))
    );
    assert_eq!(cfg.reconnect_max, RECONNECT_CAP);
}

#[test]
fn broker_lists_keep_their_order_and_each_entry_its_scheme() {
    let cases: &[(&str, &[&str])] = &[
        ("a:9090,b:9090", &["http://a:9090", "http://b:9090"]),
        // Spaces around entries are trimmed; http:// and bare entries are both h2c.
        (
            " http://10.0.0.1:9090 , broker-2.svc:9091 ,[::1]:9092 ",
            &[
                "http://10.0.0.1:9090",
                "http://broker-2.svc:9091",
                "http://[::1]:9092",
            ],
        ),
        // TLS entries keep their own host (each one's server name).
        (
            "https://b1.example:9443,https://b2.example:9443",
            &["https://b1.example:9443", "https://b2.example:9443"],
        ),
        // A duplicate is dialled twice, in its place.
        ("a:1,b:2,a:1", &["http://a:1", "http://b:2", "http://a:1"]),
    ];
    for (raw, want) in cases {
        let cfg = parse(&[("BROKER_ADDR", raw)]).unwrap_or_else(|e| panic!("{raw}: {e}"));
        assert_eq!(cfg.broker_addrs, *want, "{raw}");
    }
}

#[test]
fn bad_broker_lists_are_errors_naming_broker_addr() {
    let cases: &[(&str, &[&str])] = &[
        ("a:1,,b:2", &["entry 2 of 3", "is empty"]),
        ("a:1,b:2,", &["entry 3 of 3", "is empty"]),
        (",a:1", &["entry 1 of 2", "is empty"]),
        (" , ", &["entry 1 of 2", "is empty"]),
        (
            "a:1,ftp://b:2",
            &["entry 2 of 2", "\"ftp://b:2\"", "https://"],
        ),
        ("a:1,https://", &["entry 2 of 2", "missing its host"]),
        ("https://a:1,b:2", &["mixes https://", "plaintext"]),
        ("http://a:1,https://b:2", &["mixes https://", "one scheme"]),
    ];
    for (raw, needles) in cases {
        let err = parse(&[("BROKER_ADDR", raw)]).expect_err(raw);
        assert_eq!(err.var(), "BROKER_ADDR", "{raw}: {err}");
        let msg = err.to_string();
        assert!(msg.starts_with("BROKER_ADDR="), "{raw}: {msg}");
        for n in *needles {
            assert!(msg.contains(n), "{raw}: {msg:?} lacks {n:?}");
        }
    }
}

#[test]
fn every_entry_is_checked_when_the_worker_starts() {
    // Built in code instead of parsed: run_worker validates the list the same way.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&[], "at least one"),
        (&["http://a:1", "https://b:2"], "mixes https://"),
        (&["http://a:1", "b:2"], "entry 2 of 2"),
    ];
    for (addrs, needle) in cases {
        let mut cfg = WorkerConfig::new("http://a:1");
        cfg.broker_addrs = addrs.iter().map(|a| a.to_string()).collect();
        let err = rt
            .block_on(converge_sdk::run_worker(cfg, Registry::new(), async {}))
            .expect_err("refused");
        let WorkerError::Config(err) = err else {
            panic!("{addrs:?}: {err:?}")
        };
        assert_eq!(err.var(), "broker_addrs", "{err}");
        assert!(err.to_string().contains(needle), "{addrs:?}: {err}");
    }
    // The ceiling of the backoff is capped too.
    let mut cfg = WorkerConfig::new("http://a:1");
    cfg.reconnect_max = RECONNECT_CAP + Duration::from_millis(1);
    let err = rt
        .block_on(converge_sdk::run_worker(cfg, Registry::new(), async {}))
        .expect_err("refused");
    assert!(
        matches!(&err, WorkerError::Config(e) if e.var() == "reconnect_max" && e.to_string().contains("5s")),
        "{err:?}"
    );
}

#[test]
fn the_transport_variables_set_the_message_limit_and_compression() {
    let cfg = parse(&[("BROKER_ADDR", "http://b:1")]).unwrap();
    assert_eq!(cfg.max_message_bytes, 64 << 20);
    assert_eq!(cfg.compression, Compression::None);
    let cfg = parse(&[
        ("BROKER_ADDR", "http://b:1"),
        ("GRPC_MAX_MESSAGE_BYTES", "536870912"),
        ("GRPC_COMPRESSION", "gzip"),
    ])
    .unwrap();
    assert_eq!(cfg.max_message_bytes, 512 << 20);
    assert_eq!(cfg.compression, Compression::Gzip);
    // Set in code, the limit is checked when the worker starts.
    let mut cfg = WorkerConfig::new("http://a:1");
    cfg.max_message_bytes = (512 << 20) + 1;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt
        .block_on(converge_sdk::run_worker(cfg, Registry::new(), async {}))
        .expect_err("refused");
    assert!(
        matches!(&err, WorkerError::Config(e) if e.var() == "max_message_bytes"),
        "{err:?}"
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
        (&[("BROKER_ADDR", "https://")], "BROKER_ADDR"),
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
        (
            &[
                ("BROKER_ADDR", "http://b:1"),
                ("GRPC_MAX_MESSAGE_BYTES", "536870913"),
            ],
            "GRPC_MAX_MESSAGE_BYTES",
        ),
        (
            &[
                ("BROKER_ADDR", "http://b:1"),
                ("GRPC_MAX_MESSAGE_BYTES", "64MiB"),
            ],
            "GRPC_MAX_MESSAGE_BYTES",
        ),
        (
            &[("BROKER_ADDR", "http://b:1"), ("GRPC_COMPRESSION", "zstd")],
            "GRPC_COMPRESSION",
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

#[test]
fn credentials_default_to_none() {
    let cfg = parse(&[("BROKER_ADDR", "http://b:1")]).unwrap();
    assert_eq!(cfg.token, None);
    assert_eq!(
        (cfg.broker_ca_file, cfg.cert_file, cfg.key_file),
        (None, None, None)
    );
}

#[test]
fn https_and_the_credential_variables_are_read() {
    let cfg = parse(&[
        ("BROKER_ADDR", "https://broker.example:9443"),
        ("WORKER_TOKEN", " tok-123 "),
        ("BROKER_CA_FILE", "/etc/converge/ca.pem"),
        ("WORKER_CERT_FILE", "/etc/converge/w.pem"),
        ("WORKER_KEY_FILE", "/etc/converge/w.key"),
    ])
    .unwrap();
    assert_eq!(cfg.broker_addrs, ["https://broker.example:9443"]);
    assert_eq!(cfg.token, Some(WorkerToken::Value("tok-123".into())));
    assert_eq!(
        cfg.broker_ca_file,
        Some(PathBuf::from("/etc/converge/ca.pem"))
    );
    assert_eq!(cfg.cert_file, Some(PathBuf::from("/etc/converge/w.pem")));
    assert_eq!(cfg.key_file, Some(PathBuf::from("/etc/converge/w.key")));

    let cfg = parse(&[
        ("BROKER_ADDR", "127.0.0.1:9090"),
        ("WORKER_TOKEN_FILE", "/run/secrets/token"),
    ])
    .unwrap();
    assert_eq!(
        cfg.token,
        Some(WorkerToken::File("/run/secrets/token".into())),
        "a token works over h2c too (loopback)"
    );
    // Empty means unset, for the credentials as for everything else.
    let cfg = parse(&[
        ("BROKER_ADDR", "http://b:1"),
        ("WORKER_TOKEN", ""),
        ("BROKER_CA_FILE", " "),
    ])
    .unwrap();
    assert_eq!((cfg.token, cfg.broker_ca_file), (None, None));
}

/// Variables to parse, and the names the error must mention.
type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);

#[test]
fn inconsistent_credentials_are_errors_naming_every_variable() {
    let cases: &[Case] = &[
        (
            &[
                ("BROKER_ADDR", "https://b:1"),
                ("WORKER_TOKEN", "t"),
                ("WORKER_TOKEN_FILE", "/f"),
            ],
            &["WORKER_TOKEN", "WORKER_TOKEN_FILE"],
        ),
        (
            &[("BROKER_ADDR", "https://b:1"), ("WORKER_CERT_FILE", "/c")],
            &["WORKER_CERT_FILE", "WORKER_KEY_FILE"],
        ),
        (
            &[("BROKER_ADDR", "https://b:1"), ("WORKER_KEY_FILE", "/k")],
            &["WORKER_CERT_FILE", "WORKER_KEY_FILE"],
        ),
        (
            &[("BROKER_ADDR", "http://b:1"), ("BROKER_CA_FILE", "/ca")],
            &["BROKER_CA_FILE", "BROKER_ADDR", "https://"],
        ),
        (
            &[
                ("BROKER_ADDR", "b:1"),
                ("WORKER_CERT_FILE", "/c"),
                ("WORKER_KEY_FILE", "/k"),
            ],
            &["WORKER_CERT_FILE", "BROKER_ADDR", "https://"],
        ),
    ];
    for (vars, names) in cases {
        let err = parse(vars).expect_err(names[0]);
        assert!(matches!(err, ConfigError::Conflict { .. }), "{err:?}");
        assert!(names.contains(&err.var()), "{err:?}");
        let msg = err.to_string();
        for n in *names {
            assert!(msg.contains(n), "{msg:?} names {n}");
        }
    }
}

#[test]
fn the_token_never_reaches_debug_output_or_errors() {
    let secret = "s3cr3t-Token-value";
    let cfg = parse(&[("BROKER_ADDR", "https://b:1"), ("WORKER_TOKEN", secret)]).unwrap();
    let dbg = format!("{cfg:?}\n{cfg:#?}");
    assert!(!dbg.contains(secret), "{dbg}");
    let err = parse(&[
        ("BROKER_ADDR", "https://b:1"),
        ("WORKER_TOKEN", secret),
        ("WORKER_TOKEN_FILE", "/f"),
    ])
    .unwrap_err();
    assert!(!format!("{err} {err:?}").contains(secret));
}
