//! The stdworker binary refuses to boot on a malformed environment, naming the variable;
//! its hidden sandbox-child mode refuses to run unbounded.

use std::process::Command;

/// Runs stdworker with exactly `env` and returns (exit code, stderr).
fn boot(env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stdworker"));
    cmd.env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run stdworker");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn missing_kind_list_is_a_boot_error() {
    let (code, err) = boot(&[("BROKER_ADDR", "http://127.0.0.1:1")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("STDWORKER_EXEC_KINDS"), "{err}");
}

#[test]
fn malformed_kind_list_is_a_boot_error() {
    for bad in ["conf-leaf:x", "conf-leaf:0", "Bad Kind", "a,a:1", " , "] {
        let (code, err) = boot(&[
            ("BROKER_ADDR", "http://127.0.0.1:1"),
            ("STDWORKER_EXEC_KINDS", bad),
        ]);
        assert_eq!(code, Some(2), "{bad:?}: {err}");
        assert!(err.contains("STDWORKER_EXEC_KINDS"), "{bad:?}: {err}");
    }
}

#[test]
fn sdk_variables_are_checked_too() {
    let (code, err) = boot(&[
        ("STDWORKER_EXEC_KINDS", "exec-hello"),
        ("STDWORKER_EXEC_ALLOW", "*"),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("BROKER_ADDR"), "{err}");
    let (code, err) = boot(&[
        ("STDWORKER_EXEC_KINDS", "exec-hello"),
        ("STDWORKER_EXEC_ALLOW", "*"),
        ("BROKER_ADDR", "http://127.0.0.1:1"),
        ("WORKER_MAX_PARALLEL", "lots"),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("WORKER_MAX_PARALLEL"), "{err}");
}

#[test]
fn composer_kind_lists_are_checked_and_disjoint() {
    for var in [
        "STDWORKER_STARLARK_KINDS",
        "STDWORKER_CEL_KINDS",
        "STDWORKER_WASM_KINDS",
    ] {
        let (code, err) = boot(&[("BROKER_ADDR", "http://127.0.0.1:1"), (var, "Bad Kind")]);
        assert_eq!(code, Some(2), "{var}: {err}");
        assert!(err.contains(var), "{var}: {err}");
    }
    let (code, err) = boot(&[
        ("BROKER_ADDR", "http://127.0.0.1:1"),
        ("STDWORKER_EXEC_KINDS", "net"),
        ("STDWORKER_CEL_KINDS", "net:1"),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("STDWORKER_CEL_KINDS") && err.contains("STDWORKER_EXEC_KINDS"),
        "{err}"
    );
}

#[test]
fn malformed_exec_allowlist_is_a_boot_error() {
    for bad in ["bin/python3", "/nonexistent/handler", " , "] {
        let (code, err) = boot(&[
            ("BROKER_ADDR", "http://127.0.0.1:1"),
            ("STDWORKER_EXEC_KINDS", "exec-hello"),
            ("STDWORKER_EXEC_ALLOW", bad),
        ]);
        assert_eq!(code, Some(2), "{bad:?}: {err}");
        assert!(err.contains("STDWORKER_EXEC_ALLOW"), "{bad:?}: {err}");
    }
}

#[test]
fn exec_kinds_need_an_allowlist() {
    for allow in [None, Some(""), Some("  ")] {
        let mut env = vec![
            ("BROKER_ADDR", "http://127.0.0.1:1"),
            ("STDWORKER_EXEC_KINDS", "exec-hello"),
        ];
        env.extend(allow.map(|a| ("STDWORKER_EXEC_ALLOW", a)));
        let (code, err) = boot(&env);
        assert_eq!(code, Some(2), "{allow:?}: {err}");
        assert!(
            err.contains("STDWORKER_EXEC_ALLOW is required")
                && err.contains("STDWORKER_EXEC_ALLOW=*"),
            "{allow:?}: {err}"
        );
    }
}

#[test]
fn malformed_sandbox_bounds_are_a_boot_error() {
    for (var, bad) in [
        ("STDWORKER_SANDBOX_PROCS", "0"),
        ("STDWORKER_SANDBOX_MEMORY_MIB", "512MiB"),
        ("STDWORKER_SANDBOX_TIMEOUT", "forever"),
    ] {
        let (code, err) = boot(&[
            ("BROKER_ADDR", "http://127.0.0.1:1"),
            ("STDWORKER_CEL_KINDS", "net"),
            (var, bad),
        ]);
        assert_eq!(code, Some(2), "{var}={bad}: {err}");
        assert!(err.contains(var), "{var}={bad}: {err}");
    }
}

#[test]
fn the_sandbox_child_refuses_to_run_without_its_bound() {
    // `stdworker __sandbox` without a memory bound must not evaluate anything.
    let out = Command::new(env!("CARGO_BIN_EXE_stdworker"))
        .arg("__sandbox")
        .env_clear()
        .output()
        .expect("run stdworker __sandbox");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage"));
}
