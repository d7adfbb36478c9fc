"""Kind manifests built from the handler's own types.

`schema_of(T)` is the JSON Schema (2020-12) of a dataclass, a pydantic model or any type
pydantic understands, and `kind_manifest(...)` the whole manifest document that
`PUT /api/v1/kinds/{kind}/manifest` (or `conctl apply -f`) takes, its spec, status and config
schemas generated from the types the handler decodes with (`req.spec(NoteSpec)`). One source
for both, so the schema converge checks every spec against cannot drift from the type the
worker reads. The fields are described in docs/manifest.md.

    @dataclass
    class NoteSpec:
        text: str
        copies: int = 1

    manifest = kind_manifest(KindVersion("note", 1), spec=NoteSpec, reactions=[Reaction.work()])
    print(json.dumps(manifest, indent=2))

The schemas come from pydantic (v2), an optional dependency: `pip install
'converge-sdk[schema]'`. Nothing else in the SDK needs it, so a worker that ships hand-written
manifests does not pull it in.
"""

from __future__ import annotations

from typing import Any, Literal

from .types import JSON, KindVersion

Mode = Literal["validation", "serialization"]


def schema_of(type_: Any, mode: Mode = "validation") -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `type_`: a dataclass, a pydantic model, a TypedDict
    or any type pydantic's `TypeAdapter` takes.

    `mode="validation"` (the default) describes what a person writes, so a field with a
    default is optional: use it for specs and configs. `"serialization"` describes what the
    handler produces: use it for statuses. Unknown keys stay allowed unless the type forbids
    them: `ConfigDict(extra="forbid")` on a pydantic model, or `__pydantic_config__ =
    ConfigDict(extra="forbid")` on a dataclass, makes converge refuse a misspelt key at apply
    (`req.spec(cls)` still ignores keys a deployed worker does not know). Nested types land
    in `$defs`. A type JSON Schema cannot express raises pydantic's error, naming it.
    """
    try:
        from pydantic import TypeAdapter
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "converge_sdk.manifest needs pydantic 2: pip install 'converge-sdk[schema]'"
        ) from e
    schema: dict[str, Any] = TypeAdapter(type_).json_schema(mode=mode)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def _reaction(name: str, trigger: str, emits: list[str], **extra: JSON) -> dict[str, JSON]:
    out: dict[str, JSON] = {"name": name, "trigger": trigger, "emits": list(emits)}
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


class Reaction:
    """The reactions most kinds declare, each with the `emits` it needs (docs/manifest.md)."""

    @staticmethod
    def work(name: str = "work") -> dict[str, JSON]:
        """The kind's worker: runs on every spec change, reports status and conditions."""
        return _reaction(name, "specChange", ["status", "conditions"])

    @staticmethod
    def compose(name: str = "compose") -> dict[str, JSON]:
        """A composite's composer: children, edges, status and conditions."""
        return _reaction(name, "specChange", ["children", "edges", "status", "conditions"])

    @staticmethod
    def rollup(
        name: str = "rollup", descendants: Literal["summary", "full"] | None = None
    ) -> dict[str, JSON]:
        """A composite's rollup, once its subtree has settled."""
        return _reaction(name, "childrenSettled", ["status", "conditions"], descendants=descendants)

    @staticmethod
    def teardown(name: str = "teardown") -> dict[str, JSON]:
        """The teardown a deletion waits for (give `kind_manifest` a `finalizer_name` too)."""
        return _reaction(name, "deleteRequested", ["finalizer"])

    @staticmethod
    def operation(verb: str, output: Any = None) -> dict[str, JSON]:
        """An operation (`POST .../ops {"verb": verb}`), its output checked against the
        schema of `output` (a type) when given."""
        schema = schema_of(output, "serialization") if output is not None else None
        return _reaction(verb, "operation", ["operationOutput"], verb=verb, output_schema=schema)

    @staticmethod
    def reactor(name: str = "react") -> dict[str, JSON]:
        """A reactor kind's one reaction."""
        return _reaction(name, "reactor", ["sideEffect"])


def kind_manifest(
    kind: KindVersion,
    *,
    reactions: list[dict[str, JSON]],
    spec: Any = None,
    status: Any = None,
    config: Any = None,
    description: str | None = None,
    provider: str | None = "sdk",
    finalizer_name: str | None = None,
    max_inflight: int | None = None,
    task_deadline_secs: int | None = None,
    resync_interval_secs: int | None = None,
    resync_recomposes: bool | None = None,
    orphan_grace_secs: int | None = None,
    max_transient_attempts: int | None = None,
    edges: list[dict[str, JSON]] | None = None,
) -> dict[str, Any]:
    """The kind's manifest as a JSON-ready dict, its schemas generated from `spec` and
    `config` (validation side) and `status` (serialization side); a type left out leaves its
    schema out (an untyped spec, no status or config schema). Only the fields given appear.
    `provider` defaults to `"sdk"` (a worker written with an SDK serves the kind). converge
    checks the rest at apply (the reaction rules, each schema compiles) and answers every
    problem at once.
    """
    m: dict[str, Any] = {"kind": kind.kind, "kind_version": kind.version}
    optional: dict[str, Any] = {
        "description": description,
        "provider": provider,
        "spec_schema": schema_of(spec, "validation") if spec is not None else None,
        "status_schema": schema_of(status, "serialization") if status is not None else None,
        "config_schema": schema_of(config, "validation") if config is not None else None,
        "reactions": reactions,
        "finalizer_name": finalizer_name,
        "max_inflight": max_inflight,
        "task_deadline_secs": task_deadline_secs,
        "resync_interval_secs": resync_interval_secs,
        "resync_recomposes": resync_recomposes,
        "orphan_grace_secs": orphan_grace_secs,
        "max_transient_attempts": max_transient_attempts,
        "edges": edges,
    }
    m.update({k: v for k, v in optional.items() if v is not None})
    return m
