//! Bundle loading: entry file, load resolution inside the bundle, cycles, paths and caps.

use converge_starlark::{Bundle, Error, LimitKind, Limits, pack};

fn load(files: &[(&str, &str)]) -> Result<Bundle, Error> {
    Bundle::from_zip(&pack(files), &Limits::default())
}

const TRIVIAL: &str = "def compose(spec, config):\n    return {}\n";

#[test]
fn missing_compose_star_fails() {
    let err = load(&[("lib/x.star", "X = 1\n")]).err().unwrap();
    assert!(
        matches!(&err, Error::Bundle(m) if m.contains("compose.star")),
        "{err:?}"
    );
    let err = load(&[("sub/compose.star", TRIVIAL)]).err().unwrap();
    assert!(matches!(err, Error::Bundle(_)), "{err:?}");
}

#[test]
fn compose_must_be_a_function() {
    let err = load(&[("compose.star", "compose = 1\n")]).err().unwrap();
    assert!(
        matches!(&err, Error::Bundle(m) if m.contains("not a function")),
        "{err:?}"
    );
    let err = load(&[("compose.star", "X = 1\n")]).err().unwrap();
    assert!(matches!(err, Error::Bundle(_)), "{err:?}");
}

#[test]
fn load_outside_the_bundle_is_refused() {
    for target in [
        "../x.star",
        "/etc/passwd",
        "lib/../../x.star",
        "./lib/x.star",
        "https://x/y.star",
    ] {
        let src = format!("load({target:?}, \"f\")\n{TRIVIAL}");
        let err = load(&[("compose.star", &src), ("lib/x.star", "def f(): pass\n")])
            .err()
            .unwrap();
        assert!(matches!(err, Error::Bundle(_)), "{target}: {err:?}");
    }
    let src = format!("load(\"lib/missing.star\", \"f\")\n{TRIVIAL}");
    let err = load(&[("compose.star", &src)]).err().unwrap();
    assert!(
        matches!(&err, Error::Bundle(m) if m.contains("not in the bundle")),
        "{err:?}"
    );
}

#[test]
fn load_of_a_library_file_works_transitively() {
    let b = load(&[
        ("compose.star", "load(\"lib/a.star\", \"a\")\ndef compose(spec, config):\n    return {\"status\": a()}\n"),
        ("lib/a.star", "load(\"lib/b.star\", \"b\")\ndef a():\n    return b() + 1\n"),
        ("lib/b.star", "def b():\n    return 41\n"),
    ])
    .unwrap();
    assert_eq!(b.stats().modules_frozen, 3);
    let out = b
        .compose(
            &serde_json::json!({}),
            &serde_json::json!({}),
            &Limits::default(),
        )
        .unwrap();
    assert_eq!(out.status, Some(serde_json::json!(42)));
}

#[test]
fn a_load_cycle_is_an_error() {
    let err = load(&[
        (
            "compose.star",
            "load(\"lib/a.star\", \"a\")\ndef compose(spec, config):\n    return {}\n",
        ),
        ("lib/a.star", "load(\"lib/b.star\", \"b\")\ndef a(): pass\n"),
        ("lib/b.star", "load(\"lib/a.star\", \"a\")\ndef b(): pass\n"),
    ])
    .err()
    .unwrap();
    assert!(
        matches!(&err, Error::Bundle(m) if m.contains("load cycle") && m.contains("lib/a.star -> lib/b.star -> lib/a.star")),
        "{err:?}"
    );
}

#[test]
fn syntax_errors_name_the_file_and_line() {
    let err = load(&[("compose.star", TRIVIAL), ("lib/bad.star", "def f(:\n")])
        .err()
        .unwrap();
    assert!(
        matches!(&err, Error::Syntax { message } if message.contains("lib/bad.star:1")),
        "{err:?}"
    );
}

#[test]
fn no_io_clock_or_print_builtins() {
    for name in [
        "print",
        "open",
        "time",
        "random",
        "getenv",
        "breakpoint",
        "debug",
    ] {
        let src = format!("def compose(spec, config):\n    return {{\"status\": {name}}}\n");
        assert!(
            load(&[("compose.star", &src)]).is_err(),
            "{name} must not exist"
        );
    }
}

#[test]
fn bad_zips_and_caps() {
    let err = Bundle::from_zip(b"not a zip", &Limits::default())
        .err()
        .unwrap();
    assert!(matches!(err, Error::Bundle(_)), "{err:?}");

    let limits = Limits {
        max_bundle_entries: 2,
        ..Limits::default()
    };
    let zip = pack(&[("compose.star", TRIVIAL), ("a.star", ""), ("b.star", "")]);
    let err = Bundle::from_zip(&zip, &limits).err().unwrap();
    assert_eq!(err, Error::Limit(LimitKind::BundleEntries));

    let limits = Limits {
        max_file_bytes: 64,
        ..Limits::default()
    };
    let big = format!("{TRIVIAL}# {}\n", "x".repeat(1000));
    let err = Bundle::from_zip(&pack(&[("compose.star", &big)]), &limits)
        .err()
        .unwrap();
    assert_eq!(err, Error::Limit(LimitKind::BundleSize));

    let err = Bundle::from_zip(
        &pack(&[("compose.star", TRIVIAL), ("../evil.star", "")]),
        &Limits::default(),
    )
    .err()
    .unwrap();
    assert!(matches!(err, Error::Bundle(_)), "{err:?}");
}

#[test]
fn non_star_files_are_ignored() {
    let b = load(&[("compose.star", TRIVIAL), ("README.md", "# hi")]).unwrap();
    assert_eq!(b.stats().modules_frozen, 1);
}
