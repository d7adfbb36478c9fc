"""converge-guest-python: a `converge:handler@0.1.0` component written in Python.

It serves one composer kind, `netbom`, which turns a small network bill of materials
into one VPC and its subnets, each subnet waiting for the VPC and receiving its `vpc_id`
through a value flow.

The same composition is implemented in Rust (`guests/rust/src/netbom.rs`), Starlark and
CEL, and the four are compared by a differential test, so every observable detail is part
of the contract and mirrors the Rust guest:

- the whole spec is validated before `enabled` is looked at, so a malformed spec fails the
  same way whether or not it is enabled;
- fields are checked in the order prefix, region, cidr, enabled, subnets, then each
  subnet's name and cidr in order, and the first bad one is named in a terminal error;
- children and edges come out in subnet order;
- child specs and the status are compact JSON with sorted keys and raw UTF-8, which is
  byte for byte what serde_json writes for the Rust guest;
- a disabled spec gives an outcome with no status and no children; every stage other than
  compose gives the same empty outcome.

`build-python.sh` turns this module into a component with componentize-py; the class
below implements the `WitWorld` protocol componentize-py generates for the world.
"""

import json
from typing import Any, Dict, List, NoReturn, Optional

import wit_world
from componentize_py_types import Err
from wit_world.imports import log, types

NAME = "converge-guest-python"
VERSION = "0.1.0"
KIND = "netbom"


def _empty() -> types.Outcome:
    """An outcome with nothing in it (no status: a disabled bill reports nothing)."""
    return types.Outcome(
        status=None,
        conditions=[],
        children=[],
        edges=[],
        configs=[],
        operation_output=None,
    )


def _dump(value: Any) -> str:
    """JSON the way serde_json writes it, so the outcome matches the Rust guest's bytes."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _terminal(message: str) -> NoReturn:
    """A malformed spec cannot get better by retrying, so every spec error is terminal."""
    raise Err(types.HandlerError_Terminal(message))


def _reject_constant(name: str) -> NoReturn:
    # Python's json accepts NaN and Infinity, which are not JSON (serde_json refuses them);
    # refusing them here keeps the guests in agreement about what a valid spec is.
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    # `1e400` parses to infinity in Python; serde_json calls it out of range.
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number out of range: {text}")
    return value


def _parse(what: str, text: str) -> Any:
    """A JSON document from the host. The host forwards only what the core stored, so a
    parse failure is a bug no retry fixes: terminal."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
        # Python accepts escaped lone surrogates ("\ud800"), which cannot be encoded back
        # into the UTF-8 strings of the outcome; serde_json refuses them when parsing.
        _dump(value).encode("utf-8")
        return value
    except (ValueError, UnicodeEncodeError) as e:
        _terminal(f"{what} is not valid JSON: {e}")


def _invalid(field: str, expected: str, value: Optional[Any], present: bool) -> NoReturn:
    if not present:
        _terminal(f"netbom: spec.{field} is missing")
    _terminal(f"netbom: spec.{field} must be {expected}, got {_dump(value)}")


def _string(obj: Dict[str, Any], key: str, field: str) -> str:
    value = obj.get(key)
    # `bool` is a subclass of `int` but never of `str`, so isinstance is exact here.
    if not isinstance(value, str):
        _invalid(field, "a string", value, key in obj)
    return value


def _bill(spec: Any) -> Dict[str, Any]:
    """The validated spec, checked field by field in the contract's order."""
    if not isinstance(spec, dict):
        _terminal(f"netbom: spec must be an object, got {_dump(spec)}")
    prefix = _string(spec, "prefix", "prefix")
    region = _string(spec, "region", "region")
    cidr = _string(spec, "cidr", "cidr")
    enabled = spec.get("enabled")
    if not isinstance(enabled, bool):
        _invalid("enabled", "a boolean", enabled, "enabled" in spec)
    raw_subnets = spec.get("subnets")
    if not isinstance(raw_subnets, list):
        _invalid("subnets", "an array", raw_subnets, "subnets" in spec)
    subnets: List[Dict[str, str]] = []
    for i, subnet in enumerate(raw_subnets):
        field = f"subnets[{i}]"
        if not isinstance(subnet, dict):
            _invalid(field, "an object", subnet, True)
        subnets.append(
            {
                "name": _string(subnet, "name", f"{field}.name"),
                "cidr": _string(subnet, "cidr", f"{field}.cidr"),
            }
        )
    return {
        "prefix": prefix,
        "region": region,
        "cidr": cidr,
        "enabled": enabled,
        "subnets": subnets,
    }


def netbom(req: types.Request) -> types.Outcome:
    """Compose builds the network; every other stage has nothing to do."""
    if req.stage != types.Stage.COMPOSE:
        return _empty()
    bill = _bill(_parse("spec", req.target.spec))
    if not bill["enabled"]:
        return _empty()
    region = bill["region"]
    vpc = types.ResourceRef(kind="vpc", name=f"{bill['prefix']}-vpc")
    children = [
        types.ChildSpec(
            kind=vpc.kind,
            kind_version=1,
            name=vpc.name,
            spec=_dump({"cidr": bill["cidr"], "region": region}),
            labels=[],
        )
    ]
    edges = []
    for subnet in bill["subnets"]:
        name = f"{bill['prefix']}-{subnet['name']}"
        children.append(
            types.ChildSpec(
                kind="subnet",
                kind_version=1,
                name=name,
                # `vpc_id` stays null until the value flow copies the VPC's status into it.
                spec=_dump({"cidr": subnet["cidr"], "region": region, "vpc_id": None}),
                labels=[],
            )
        )
        edges.append(
            types.DepEdge(
                dependent=types.ResourceRef(kind="subnet", name=name),
                dependency=vpc,
                values=[types.ValueFlow(dependent_field="/vpc_id", source_field="/vpc_id")],
            )
        )
    outcome = _empty()
    outcome.status = _dump({"subnets": len(bill["subnets"])})
    outcome.children = children
    outcome.edges = edges
    return outcome


class WitWorld(wit_world.WitWorld):
    """The component's exports (the protocol componentize-py generates for the world)."""

    def describe(self) -> types.Info:
        log.log(log.Level.DEBUG, f"describe: {NAME} {VERSION}")
        return types.Info(
            name=NAME,
            version=VERSION,
            kinds=[types.KindRef(kind=KIND, version=1)],
        )

    def reconcile(self, req: types.Request) -> types.Outcome:
        # One line per task, so a test (or an operator) can see the host forwards logs.
        log.log(
            log.Level.DEBUG,
            f"{req.kind} {req.stage.name.lower()} reaction={req.reaction} "
            f"name={req.target.name} generation={req.generation} attempt={req.attempt}",
        )
        if req.kind != KIND:
            _terminal(f"unknown kind {req.kind!r}")
        return netbom(req)
