"""WorkerConfig.from_env: the Rust SDK's variables, defaults, and loud errors, and the
transport-security ones (token, token file, TLS files)."""

from pathlib import Path

import pytest

from converge_sdk import RECONNECT_CAP, ConfigError, WorkerConfig, parse_duration


def env(**kv: str) -> dict[str, str]:
    return {"BROKER_ADDR": "http://127.0.0.1:9090", **kv}


def test_defaults_and_values() -> None:
    c = WorkerConfig.from_env(env())
    assert (c.max_parallel, c.drain_timeout, c.kinds) == (16, 50.0, None)
    assert c.targets == ["127.0.0.1:9090"]
    assert (c.reconnect_min, c.reconnect_max) == (1.0, 5.0) and c.reconnect_max == RECONNECT_CAP
    assert c.worker_name.endswith(f"-{__import__('os').getpid()}")
    c = WorkerConfig.from_env(env(WORKER_MAX_PARALLEL="3", WORKER_DRAIN_TIMEOUT="500ms",
                                  WORKER_KINDS=" a, b ,", WORKER_NAME=" w1 "))
    assert (c.max_parallel, c.drain_timeout, c.kinds, c.worker_name) == (3, 0.5, ["a", "b"], "w1")


def test_bare_host_port_is_accepted() -> None:
    c = WorkerConfig.from_env({"BROKER_ADDR": "localhost:9090"})
    assert c.broker_addrs == ["http://localhost:9090"] and c.targets == ["localhost:9090"]


@pytest.mark.parametrize(
    ("raw", "addrs"),
    [
        ("a:9090,b:9090", ["http://a:9090", "http://b:9090"]),
        # Spaces around entries are trimmed; http:// and bare entries are both h2c.
        (" http://10.0.0.1:9090 , broker-2.svc:9091 ,[::1]:9092 ",
         ["http://10.0.0.1:9090", "http://broker-2.svc:9091", "http://[::1]:9092"]),
        # TLS entries keep their own host (each one's server name).
        ("https://b1.example:9443,https://b2.example:9443",
         ["https://b1.example:9443", "https://b2.example:9443"]),
        # A duplicate is dialled twice, in its place.
        ("a:1,b:2,a:1", ["http://a:1", "http://b:2", "http://a:1"]),
    ],
)
def test_broker_lists_keep_their_order(raw: str, addrs: list[str]) -> None:
    c = WorkerConfig.from_env({"BROKER_ADDR": raw})
    assert c.broker_addrs == addrs
    assert c.targets == [a.split("://", 1)[1] for a in addrs]
    assert c.tls == addrs[0].startswith("https://")


@pytest.mark.parametrize(
    ("raw", "needles"),
    [
        ("a:1,,b:2", ["entry 2 of 3", "is empty"]),
        ("a:1,b:2,", ["entry 3 of 3", "is empty"]),
        (",a:1", ["entry 1 of 2", "is empty"]),
        (" , ", ["entry 1 of 2", "is empty"]),
        ("a:1,ftp://b:2", ["entry 2 of 2", "'ftp://b:2'", "https://"]),
        ("a:1,https://", ["entry 2 of 2"]),
        ("a:1,b", ["entry 2 of 2", "missing port"]),
        ("https://a:1,b:2", ["mixes https://", "plaintext"]),
        ("http://a:1,https://b:2", ["mixes https://", "one scheme"]),
    ],
)
def test_bad_broker_lists_name_broker_addr(raw: str, needles: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_env({"BROKER_ADDR": raw})
    assert e.value.var == "BROKER_ADDR"
    msg = str(e.value)
    assert msg.startswith("BROKER_ADDR=")
    for n in needles:
        assert n in msg, msg


@pytest.mark.parametrize(
    ("addrs", "needle"),
    [
        ([], "non-empty list"),
        ("http://a:1", "non-empty list"),
        (["http://a:1", "https://b:2"], "mixes https://"),
        (["http://a:1", "ftp://b:2"], "entry 2 of 2"),
    ],
)
def test_validate_checks_every_broker(addrs: object, needle: str) -> None:
    c = WorkerConfig(broker_addrs=addrs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=needle) as e:
        c.validate()
    assert e.value.var == "broker_addrs"


def test_the_backoff_ceiling_is_capped() -> None:
    WorkerConfig(broker_addrs=["h:1"], reconnect_max=RECONNECT_CAP).validate()
    with pytest.raises(ConfigError, match="must not exceed 5s") as e:
        WorkerConfig(broker_addrs=["h:1"], reconnect_max=RECONNECT_CAP + 0.001).validate()
    assert e.value.var == "reconnect_max"


def test_empty_counts_as_unset() -> None:
    assert WorkerConfig.from_env(env(WORKER_MAX_PARALLEL=" ")).max_parallel == 16


@pytest.mark.parametrize(
    ("kv", "var"),
    [
        ({"BROKER_ADDR": ""}, "BROKER_ADDR"),
        ({"BROKER_ADDR": "https://x"}, "BROKER_ADDR"),
        ({"BROKER_ADDR": "https://x:1/path"}, "BROKER_ADDR"),
        ({"BROKER_ADDR": "http://"}, "BROKER_ADDR"),
        ({"BROKER_ADDR": "http://host"}, "BROKER_ADDR"),
        ({"BROKER_ADDR": "grpc://h:1"}, "BROKER_ADDR"),
        ({"BROKER_ADDR": "h:99999"}, "BROKER_ADDR"),
        (env(WORKER_MAX_PARALLEL="0"), "WORKER_MAX_PARALLEL"),
        (env(WORKER_MAX_PARALLEL="-1"), "WORKER_MAX_PARALLEL"),
        (env(WORKER_MAX_PARALLEL="lots"), "WORKER_MAX_PARALLEL"),
        (env(WORKER_MAX_PARALLEL="99999999"), "WORKER_MAX_PARALLEL"),
        (env(WORKER_DRAIN_TIMEOUT="soon"), "WORKER_DRAIN_TIMEOUT"),
        (env(WORKER_DRAIN_TIMEOUT="5d"), "WORKER_DRAIN_TIMEOUT"),
        (env(WORKER_DRAIN_TIMEOUT="-1s"), "WORKER_DRAIN_TIMEOUT"),
        (env(WORKER_KINDS=" , "), "WORKER_KINDS"),
        (env(GRPC_MAX_MESSAGE_BYTES="536870913"), "GRPC_MAX_MESSAGE_BYTES"),
        (env(GRPC_MAX_MESSAGE_BYTES="1024"), "GRPC_MAX_MESSAGE_BYTES"),
        (env(GRPC_MAX_MESSAGE_BYTES="64MiB"), "GRPC_MAX_MESSAGE_BYTES"),
        (env(GRPC_COMPRESSION="zstd"), "GRPC_COMPRESSION"),
    ],
)
def test_malformed_values_name_the_variable(kv: dict[str, str], var: str) -> None:
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_env(kv)
    assert e.value.var == var
    assert var in str(e.value)


def test_transport_variables_set_the_message_limit_and_compression() -> None:
    c = WorkerConfig.from_env(env())
    assert (c.max_message_bytes, c.compression) == (64 << 20, "none")
    c = WorkerConfig.from_env(env(GRPC_MAX_MESSAGE_BYTES="536870912", GRPC_COMPRESSION=" GZIP "))
    assert (c.max_message_bytes, c.compression) == (512 << 20, "gzip")
    assert WorkerConfig.from_env(env(GRPC_COMPRESSION="identity")).compression == "none"
    for field, value in (("max_message_bytes", (512 << 20) + 1), ("compression", "br")):
        c = WorkerConfig(broker_addrs=["http://h:1"])
        setattr(c, field, value)
        with pytest.raises(ConfigError, match=field):
            c.validate()


def test_missing_broker_addr() -> None:
    with pytest.raises(ConfigError, match="BROKER_ADDR is required"):
        WorkerConfig.from_env({})


def test_durations() -> None:
    assert parse_duration("45s") == 45
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2m") == 120
    assert parse_duration("1h") == 3600
    assert parse_duration("7") == 7
    for bad in ("soon", "5d", "-1s", ""):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_validate_rejects_unusable_fields() -> None:
    c = WorkerConfig(broker_addrs=["http://h:1"], max_parallel=0)
    with pytest.raises(ConfigError, match="max_parallel"):
        c.validate()
    c = WorkerConfig(broker_addrs=["http://h:1"], reconnect_min=2, reconnect_max=1)
    with pytest.raises(ConfigError, match="reconnect_max"):
        c.validate()


CERT_PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY_PEM = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"
SECRET = "tok-3f9a2b7c"


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_https_address_selects_tls_and_keeps_the_host_port_target() -> None:
    c = WorkerConfig.from_env({"BROKER_ADDR": "https://broker.example:9443/"})
    assert c.tls and c.targets == ["broker.example:9443"]
    assert not WorkerConfig.from_env(env()).tls
    assert not WorkerConfig.from_env({"BROKER_ADDR": "localhost:9090"}).tls


def test_no_token_means_no_metadata() -> None:
    c = WorkerConfig.from_env(env())
    assert (c.token, c.token_file, c.read_token(), c.call_metadata()) == (None, None, None, ())
    assert c.tls_material() == (None, None, None)


def test_token_becomes_bearer_metadata_and_stays_out_of_the_repr() -> None:
    c = WorkerConfig.from_env(env(WORKER_TOKEN=f"  {SECRET}\n"))
    assert c.call_metadata() == (("authorization", f"Bearer {SECRET}"),)
    assert SECRET not in repr(c)
    assert SECRET not in str(c)


def test_token_file_is_trimmed_and_reread_at_every_call(tmp_path: Path) -> None:
    f = write(tmp_path / "token", f"\n {SECRET}  \n")
    c = WorkerConfig.from_env(env(WORKER_TOKEN_FILE=f))
    assert c.read_token() == SECRET
    write(tmp_path / "token", "rotated-token\n")
    assert c.call_metadata() == (("authorization", "Bearer rotated-token"),)


def test_token_and_token_file_together_is_an_error_naming_both(tmp_path: Path) -> None:
    f = write(tmp_path / "token", SECRET)
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_env(env(WORKER_TOKEN="other", WORKER_TOKEN_FILE=f))
    assert "WORKER_TOKEN and WORKER_TOKEN_FILE" in str(e.value)
    c = WorkerConfig(broker_addrs=["http://h:1"], token="other", token_file=f)
    with pytest.raises(ConfigError, match="WORKER_TOKEN and WORKER_TOKEN_FILE"):
        c.validate()


def test_unusable_token_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_env(env(WORKER_TOKEN_FILE=missing))
    assert e.value.var == "WORKER_TOKEN_FILE"
    assert missing in str(e.value) and "cannot read" in str(e.value)
    with pytest.raises(ConfigError, match="WORKER_TOKEN_FILE.* is empty"):
        WorkerConfig.from_env(env(WORKER_TOKEN_FILE=write(tmp_path / "empty", " \n")))


def test_a_token_that_cannot_be_a_header_is_refused_without_showing_it(tmp_path: Path) -> None:
    bad = "two words-" + SECRET
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_env(env(WORKER_TOKEN=bad))
    assert e.value.var == "WORKER_TOKEN" and SECRET not in str(e.value)
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_env(env(WORKER_TOKEN_FILE=write(tmp_path / "t", bad)))
    assert e.value.var == "WORKER_TOKEN_FILE" and SECRET not in str(e.value)
    with pytest.raises(ConfigError, match="WORKER_TOKEN is empty"):
        WorkerConfig(broker_addrs=["http://h:1"], token="").validate()


def test_tls_files_are_read(tmp_path: Path) -> None:
    ca = write(tmp_path / "ca.pem", CERT_PEM)
    cert = write(tmp_path / "cert.pem", CERT_PEM + CERT_PEM)
    key = write(tmp_path / "key.pem", KEY_PEM)
    c = WorkerConfig.from_env({"BROKER_ADDR": "https://b:1", "BROKER_CA_FILE": ca,
                               "WORKER_CERT_FILE": cert, "WORKER_KEY_FILE": key})
    assert (c.ca_file, c.cert_file, c.key_file) == (ca, cert, key)
    assert c.tls_material() == (CERT_PEM.encode(), KEY_PEM.encode(), (CERT_PEM * 2).encode())
    c = WorkerConfig.from_env({"BROKER_ADDR": "https://b:1", "BROKER_CA_FILE": ca})
    assert c.tls_material() == (CERT_PEM.encode(), None, None)


@pytest.mark.parametrize(
    ("vars", "bad", "says"),
    [
        ({"BROKER_ADDR": "http://b:1", "BROKER_CA_FILE": "ca"}, "BROKER_CA_FILE", "https://"),
        ({"BROKER_ADDR": "b:1", "WORKER_CERT_FILE": "cert", "WORKER_KEY_FILE": "key"},
         "WORKER_CERT_FILE", "https://"),
        ({"BROKER_ADDR": "https://b:1", "WORKER_CERT_FILE": "cert"},
         "WORKER_KEY_FILE", "WORKER_CERT_FILE is set but WORKER_KEY_FILE is not"),
        ({"BROKER_ADDR": "https://b:1", "WORKER_KEY_FILE": "key"},
         "WORKER_CERT_FILE", "WORKER_KEY_FILE is set but WORKER_CERT_FILE is not"),
        ({"BROKER_ADDR": "https://b:1", "BROKER_CA_FILE": "missing.pem"},
         "BROKER_CA_FILE", "cannot read"),
        ({"BROKER_ADDR": "https://b:1", "BROKER_CA_FILE": "notpem"},
         "BROKER_CA_FILE", "no PEM CERTIFICATE"),
        ({"BROKER_ADDR": "https://b:1", "WORKER_CERT_FILE": "cert", "WORKER_KEY_FILE": "notpem"},
         "WORKER_KEY_FILE", "no PEM PRIVATE KEY"),
        ({"BROKER_ADDR": "https://b:1", "WORKER_CERT_FILE": "key", "WORKER_KEY_FILE": "key"},
         "WORKER_CERT_FILE", "no PEM CERTIFICATE"),
    ],
)
def test_bad_tls_settings_name_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vars: dict[str, str], bad: str, says: str
) -> None:
    write(tmp_path / "ca", CERT_PEM)
    write(tmp_path / "cert", CERT_PEM)
    write(tmp_path / "key", KEY_PEM)
    write(tmp_path / "notpem", "hello\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_env(vars)
    assert e.value.var == bad
    assert bad in str(e.value) and says in str(e.value)
