"""effective_config / effective_bundle: deep merge, override wins per key, None when neither."""

from converge_sdk import ProviderConfig, effective_bundle, effective_config
from converge_sdk.testing import request


def test_deep_merge_override_wins_per_key() -> None:
    d = {"a": 1, "nested": {"x": 1, "y": {"deep": True}}, "list": [1, 2]}
    o = {"b": 2, "nested": {"x": 9, "y": {"more": 1}}, "list": [3]}
    assert effective_config(d, o) == {
        "a": 1, "b": 2, "nested": {"x": 9, "y": {"deep": True, "more": 1}}, "list": [3]
    }
    assert d == {"a": 1, "nested": {"x": 1, "y": {"deep": True}}, "list": [1, 2]}, "inputs unchanged"


def test_one_side_or_none() -> None:
    v = {"a": 1}
    assert effective_config(v, None) == v
    assert effective_config(None, v) == v
    assert effective_config(None, None) is None
    out = effective_config(v, None)
    out["a"] = 2
    assert v == {"a": 1}, "the result is a copy"


def test_non_objects_replace() -> None:
    assert effective_config({"a": 1}, 5) == 5
    assert effective_config({"a": {"b": 1}}, {"a": None}) == {"a": None}
    assert effective_config("s", {"a": 1}) == {"a": 1}


def test_bundle_override_wins_when_present() -> None:
    assert effective_bundle(b"def", b"") == b"def"
    assert effective_bundle(b"def", b"over") == b"over"
    assert effective_bundle(b"", b"") == b""


def test_request_helpers_use_the_same_rules() -> None:
    req = request("k", {}, config=ProviderConfig(spec={"a": {"x": 1}}, bundle=b"zz"),
                  config_override={"a": {"y": 2}})
    assert req.effective_config() == {"a": {"x": 1, "y": 2}}
    assert req.effective_bundle() == b"zz"
    req.bundle_override = b"o"
    assert req.effective_bundle() == b"o"
