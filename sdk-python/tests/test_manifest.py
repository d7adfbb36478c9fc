"""Kind manifests from types (converge_sdk.manifest): the schemas pydantic generates from
dataclasses and models, the reaction helpers, the document's shape, `req.spec` on a strict
model, and, end to end, converge accepting a generated manifest and enforcing its schema."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import pytest
from harness import Converge
from pydantic import BaseModel, ConfigDict, Field
from test_e2e import T, fast_config, worker

from converge_sdk import (
    Condition,
    KindVersion,
    Outcome,
    Provider,
    Reaction,
    ReactionRequest,
    TerminalError,
    kind_manifest,
    schema_of,
)
from converge_sdk.testing import request, run


@dataclass
class NoteSpec:
    __pydantic_config__ = ConfigDict(extra="forbid")

    text: str = field(metadata={"description": "What the note says."})
    copies: int = 1
    mode: Literal["append", "replace"] | None = None


class NoteStatus(BaseModel):
    path: str
    bytes: int = Field(ge=0)


class NoteConfig(BaseModel):
    directory: str
    token: str | None = Field(default=None, json_schema_extra={"writeOnly": True})


def test_schema_of_a_strict_dataclass() -> None:
    s = schema_of(NoteSpec)
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert s["type"] == "object"
    assert s["additionalProperties"] is False
    assert s["required"] == ["text"]
    props = s["properties"]
    assert props["text"]["type"] == "string"
    assert props["copies"] == {"default": 1, "title": "Copies", "type": "integer"}
    assert {"enum": ["append", "replace"], "type": "string"} in props["mode"]["anyOf"]


def test_schema_of_a_model_and_nested_types() -> None:
    st = schema_of(NoteStatus, "serialization")
    assert st["required"] == ["path", "bytes"]
    assert st["properties"]["bytes"]["minimum"] == 0

    class Team(BaseModel):
        name: str

    class Bom(BaseModel):
        teams: list[Team]

    s = schema_of(Bom)
    assert s["properties"]["teams"]["items"] == {"$ref": "#/$defs/Team"}
    assert s["$defs"]["Team"]["required"] == ["name"]


def test_schema_of_refuses_what_json_schema_cannot_express() -> None:
    @dataclass
    class Hooked:
        on_done: Callable[[], int]

    with pytest.raises(Exception, match="JsonSchema"):
        schema_of(Hooked)


def test_kind_manifest_is_the_whole_document() -> None:
    m = kind_manifest(
        KindVersion("note", 2),
        description="A note on disk.",
        spec=NoteSpec,
        status=NoteStatus,
        config=NoteConfig,
        reactions=[Reaction.work(), Reaction.teardown()],
        finalizer_name="example.dev/note",
        task_deadline_secs=30,
    )
    assert m["kind"] == "note" and m["kind_version"] == 2 and m["provider"] == "sdk"
    assert m["spec_schema"] == schema_of(NoteSpec)
    assert m["status_schema"] == schema_of(NoteStatus, "serialization")
    assert m["config_schema"]["properties"]["token"]["writeOnly"] is True
    assert m["reactions"] == [
        {"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]},
        {"name": "teardown", "trigger": "deleteRequested", "emits": ["finalizer"]},
    ]
    # Only what was given, and JSON all the way down.
    assert sorted(json.loads(json.dumps(m))) == sorted([
        "kind", "kind_version", "description", "provider", "spec_schema", "status_schema",
        "config_schema", "reactions", "finalizer_name", "task_deadline_secs",
    ])


def test_reaction_helpers() -> None:
    assert Reaction.compose()["emits"] == ["children", "edges", "status", "conditions"]
    assert Reaction.rollup(descendants="full") == {
        "name": "rollup", "trigger": "childrenSettled", "emits": ["status", "conditions"],
        "descendants": "full",
    }

    class Snapshot(BaseModel):
        snapshot_id: str

    op = Reaction.operation("backup", Snapshot)
    assert op["verb"] == "backup" and op["output_schema"]["required"] == ["snapshot_id"]  # type: ignore[index]
    assert Reaction.reactor() == {"name": "react", "trigger": "reactor", "emits": ["sideEffect"]}


class StrictSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    n: int = 1


class Echo(Provider):
    kind = KindVersion("note", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        spec = req.spec(StrictSpec)
        return Outcome(status={"text": spec.text, "n": spec.n})


async def test_req_spec_on_a_strict_model_ignores_unknown_keys() -> None:
    # A model that forbids extra keys still decodes a spec a newer manifest added keys to.
    out = await run(Echo(), request("note", {"text": "hi", "added_later": True}))
    assert out.status == {"text": "hi", "n": 1}
    with pytest.raises(TerminalError, match="invalid spec"):
        await run(Echo(), request("note", {"n": "many"}))


class Note(Provider):
    kind = KindVersion("pynote-e2e", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        spec = req.spec(NoteSpec)
        status = NoteStatus(path=f"/notes/{req.resource.name}", bytes=len(spec.text) * spec.copies)
        return Outcome(status=status.model_dump()).with_condition(Condition.ready(True, "Written"))


async def test_a_generated_manifest_is_accepted_and_enforced(converge: Converge) -> None:
    m = kind_manifest(Note.kind, spec=NoteSpec, status=NoteStatus, config=NoteConfig,
                      reactions=[Reaction.work()])
    status, body = await converge.call("PUT", "/api/v1/kinds/pynote-e2e/manifest", m)
    assert status == 201, body
    # The generated spec schema is what converge checks: an unknown key and a wrong type are
    # refused at apply, before any worker sees them.
    for bad in ({"text": "hi", "colour": "red"}, {"text": "hi", "copies": "two"}):
        status, body = await converge.call(
            "POST", "/api/v1/resources",
            {"kind": "pynote-e2e", "kind_version": 1, "name": "bad", "spec": bad})
        assert status == 422, body
    status, body = await converge.call(
        "POST", "/api/v1/providerconfigs",
        {"name": "notes", "kind": "pynote-e2e", "kind_version": 1, "is_default": True,
         "spec": {"directory": 3}})
    assert status == 422, body  # the config schema, from NoteConfig
    async with worker([Note()], fast_config(converge.broker, "e2e-manifest")):
        await converge.apply("pynote-e2e", "hello", {"text": "hi", "copies": 2})
        r = await converge.wait_resource("pynote-e2e", "hello", "Ready", lambda v: v["phase"] == "Ready", T)
        assert r["status"] == {"path": "/notes/hello", "bytes": 4}
