"""WorkerConfig.from_env: the Rust SDK's variables, defaults, and loud errors."""

import pytest

from converge_sdk import ConfigError, WorkerConfig, parse_duration


def env(**kv: str) -> dict[str, str]:
    return {"BROKER_ADDR": "http://127.0.0.1:9090", **kv}


def test_defaults_and_values() -> None:
    c = WorkerConfig.from_env(env())
    assert (c.max_parallel, c.drain_timeout, c.kinds) == (16, 50.0, None)
    assert c.target == "127.0.0.1:9090"
    assert c.worker_name.endswith(f"-{__import__('os').getpid()}")
    c = WorkerConfig.from_env(env(WORKER_MAX_PARALLEL="3", WORKER_DRAIN_TIMEOUT="500ms",
                                  WORKER_KINDS=" a, b ,", WORKER_NAME=" w1 "))
    assert (c.max_parallel, c.drain_timeout, c.kinds, c.worker_name) == (3, 0.5, ["a", "b"], "w1")


def test_bare_host_port_is_accepted() -> None:
    assert WorkerConfig.from_env({"BROKER_ADDR": "localhost:9090"}).target == "localhost:9090"


def test_empty_counts_as_unset() -> None:
    assert WorkerConfig.from_env(env(WORKER_MAX_PARALLEL=" ")).max_parallel == 16


@pytest.mark.parametrize(
    ("kv", "var"),
    [
        ({"BROKER_ADDR": ""}, "BROKER_ADDR"),
        ({"BROKER_ADDR": "https://x:1"}, "BROKER_ADDR"),
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
    ],
)
def test_malformed_values_name_the_variable(kv: dict[str, str], var: str) -> None:
    with pytest.raises(ConfigError) as e:
        WorkerConfig.from_env(kv)
    assert e.value.var == var
    assert var in str(e.value)


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
    c = WorkerConfig(broker_addr="http://h:1", max_parallel=0)
    with pytest.raises(ConfigError, match="max_parallel"):
        c.validate()
    c = WorkerConfig(broker_addr="http://h:1", reconnect_min=2, reconnect_max=1)
    with pytest.raises(ConfigError, match="reconnect_max"):
        c.validate()
