"""Wire conversions: StageTask → ReactionRequest for every stage, Outcome → StageComplete,
and the failure mapping of handler results."""

import json
import uuid
from dataclasses import dataclass

import pytest

from converge_sdk import (
    ChildSpec,
    Condition,
    DepEdge,
    Outcome,
    ProviderConfig,
    ProviderConfigSpec,
    ResourceRef,
    Stage,
    TerminalError,
    TransientError,
    Transition,
    ValueFlow,
)
from converge_sdk._proto import worker_pb2 as pb
from converge_sdk.convert import (
    MalformedTask,
    TaskEcho,
    complete_from_outcome,
    request_from_task,
    result_complete,
)

RID = uuid.uuid4()


def res(**kw: object) -> pb.Resource:
    base = dict(id=RID.bytes, kind="k", name="r", spec=b'{"a": 1}', generation=3, phase="Reconciling")
    base.update(kw)
    return pb.Resource(**base)


def test_work_task_decodes() -> None:
    task = pb.StageTask(
        stage=pb.STAGE_WORK, kind="k", kind_version=0, generation=3, reaction="work",
        lease_token="L", claim_epoch=9, provider_config=b'{"o": 1}', provider_bundle=b"b",
        attempt=2, work_req=pb.WorkRequest(resource=res(labels={"x": "y"}), status=b'{"s": 1}'),
    )
    req = request_from_task(task, ProviderConfig(spec={"d": 1}))
    assert (req.reaction, req.stage, req.kind, req.kind_version) == ("work", Stage.WORK, "k", 1)
    assert req.trigger == "specChange", "a missing trigger defaults by stage"
    assert (req.generation, req.attempt) == (3, 2)
    assert req.resource.id == RID and req.resource.spec == {"a": 1} and req.resource.labels == {"x": "y"}
    assert req.resource.owner_id is None
    assert req.status == {"s": 1}
    assert req.config_override == {"o": 1} and req.bundle_override == b"b"
    assert req.effective_config() == {"d": 1, "o": 1}
    assert req.spec() == {"a": 1}


def test_other_stages_decode() -> None:
    c = request_from_task(pb.StageTask(stage=pb.STAGE_COMPOSE, reaction="compose",
                                       compose_req=pb.ComposeRequest(root=res(), observed=[res(name="c")])),
                          ProviderConfig())
    assert [o.name for o in c.observed] == ["c"]
    r = request_from_task(pb.StageTask(stage=pb.STAGE_ROLLUP, reaction="rollup",
                                       rollup_req=pb.RollupRequest(root=res(), descendants=[res(is_ready=True)])),
                          ProviderConfig())
    assert r.trigger == "childrenSettled" and r.descendants[0].is_ready
    o = request_from_task(pb.StageTask(stage=pb.STAGE_OPERATE, reaction="ping", operate_req=pb.OperateRequest(
        resource=res(), operation=pb.Operation(verb="ping", input=b"[1]", attempts=1))), ProviderConfig())
    assert o.operation is not None and (o.operation.verb, o.operation.input) == ("ping", [1])
    x = request_from_task(pb.StageTask(stage=pb.STAGE_REACT, reaction="notify", react_req=pb.ReactRequest(
        resource=res(), transition=pb.TRANSITION_SYNCED, dedup_token="t")), ProviderConfig())
    assert (x.transition, x.dedup_token, x.trigger) == (Transition.SYNCED, "t", "reactor")
    d = request_from_task(pb.StageTask(stage=pb.STAGE_DELETE, reaction="teardown",
                                       delete_req=pb.DeleteRequest(resource=res())), ProviderConfig())
    assert d.trigger == "deleteRequested"


def test_dry_run_is_read_from_a_compose_only() -> None:
    def compose(dry_run: bool) -> pb.StageTask:
        return pb.StageTask(stage=pb.STAGE_COMPOSE, reaction="compose", dry_run=dry_run,
                            compose_req=pb.ComposeRequest(root=res()))
    assert request_from_task(compose(True), ProviderConfig()).dry_run
    assert not request_from_task(compose(False), ProviderConfig()).dry_run
    work = pb.StageTask(stage=pb.STAGE_WORK, reaction="work", dry_run=True,
                        work_req=pb.WorkRequest(resource=res()))
    assert not request_from_task(work, ProviderConfig()).dry_run, "only a compose is a dry run"


@pytest.mark.parametrize(
    ("task", "msg"),
    [
        (pb.StageTask(stage=pb.STAGE_WORK, reaction=""), "empty reaction"),
        (pb.StageTask(stage=pb.STAGE_UNSPECIFIED, reaction="w"), "unknown stage"),
        (pb.StageTask(stage=pb.STAGE_WORK, reaction="w"), "no payload"),
        (pb.StageTask(stage=pb.STAGE_WORK, reaction="w", delete_req=pb.DeleteRequest(resource=res())),
         "does not match"),
        (pb.StageTask(stage=pb.STAGE_WORK, reaction="w", work_req=pb.WorkRequest()), "no resource"),
        (pb.StageTask(stage=pb.STAGE_WORK, reaction="w", work_req=pb.WorkRequest(resource=res(spec=b"{"))),
         "malformed"),
    ],
)
def test_malformed_tasks(task: pb.StageTask, msg: str) -> None:
    with pytest.raises(MalformedTask, match=msg):
        request_from_task(task, ProviderConfig())


ECHO_WORK = TaskEcho("L", pb.STAGE_WORK, 5)
ECHO_COMPOSE = TaskEcho("L", pb.STAGE_COMPOSE, 5)


def test_work_outcome_encodes() -> None:
    c = complete_from_outcome(ECHO_WORK, Outcome(status={"x": 1}).with_condition(Condition.ready(False, "R", "m")))
    assert (c.lease_token, c.claim_epoch, c.stage, c.error_message) == ("L", 5, pb.STAGE_WORK, "")
    assert json.loads(c.status) == {"x": 1}
    assert [(k.type, k.status, k.reason, k.message) for k in c.conditions] == [("Ready", "False", "R", "m")]
    assert not c.HasField("compose") and c.output == b""


def test_compose_outcome_encodes() -> None:
    out = (
        Outcome(status={"n": 2})
        .with_child(ChildSpec("leaf", 1, "a", {"i": 0}).with_label("l", "v"))
        .with_child(ChildSpec("leaf", 1, "b", {"i": 1}))
        .with_edge(DepEdge(ResourceRef("leaf", "b"), ResourceRef("leaf", "a")).with_value(ValueFlow("/u", "/s")))
        .with_config(ProviderConfigSpec("cfg", "leaf", 1, True, {"k": 1}))
    )
    c = complete_from_outcome(ECHO_COMPOSE, out)
    assert c.status == b"" and c.HasField("compose")
    assert [(d.kind, d.name, json.loads(d.spec), dict(d.labels)) for d in c.compose.desired] == [
        ("leaf", "a", {"i": 0}, {"l": "v"}), ("leaf", "b", {"i": 1}, {})]
    e = c.compose.edges[0]
    assert (getattr(e, "from").name, e.to.name, e.values[0].dependent_field, e.values[0].source_field) == (
        "b", "a", "/u", "/s")
    assert c.compose.configs[0].is_default and json.loads(c.compose.configs[0].spec) == {"k": 1}
    assert json.loads(c.compose.status) == {"n": 2}


def test_output_encodes() -> None:
    assert json.loads(complete_from_outcome(ECHO_WORK, Outcome(output={"pong": None})).output) == {"pong": None}


def test_result_mapping() -> None:
    assert result_complete(ECHO_WORK, TerminalError("bad")).terminal is True
    t = result_complete(ECHO_WORK, TransientError("later"))
    assert (t.error_message, t.terminal) == ("later", False)
    x = result_complete(ECHO_WORK, KeyError("k"))
    assert x.terminal is False and "KeyError" in x.error_message and "'k'" in x.error_message
    assert result_complete(ECHO_WORK, None).error_message == ""
    assert result_complete(ECHO_WORK, {"not": "an outcome"}).terminal is True
    bad_child = Outcome().with_child(ChildSpec("leaf", 0, "a"))
    c = result_complete(ECHO_COMPOSE, bad_child)
    assert c.terminal is True and "kind_version" in c.error_message
    c = result_complete(ECHO_WORK, Outcome(status={"x": object()}))
    assert c.terminal is True and "cannot encode" in c.error_message
    assert result_complete(ECHO_WORK, TransientError("")).error_message == "handler failed"


@dataclass
class TypedSpec:
    size: int
    tier: str = "basic"


class PlainSpec:
    def __init__(self, size: int, *, tier: str = "basic") -> None:
        self.size, self.tier = size, tier


class OpenSpec:
    def __init__(self, **kw: object) -> None:
        self.kw = kw


def test_unknown_spec_keys_are_ignored() -> None:
    """One decoding rule in every SDK: a key the typed spec does not know is ignored, so a
    kind adding an optional field never breaks a deployed worker."""
    req = request_from_task(pb.StageTask(stage=pb.STAGE_WORK, reaction="work", work_req=pb.WorkRequest(
        resource=res(spec=b'{"size": 3, "added_later": {"x": 1}}'))), ProviderConfig())
    assert req.spec(TypedSpec) == TypedSpec(size=3)
    plain = req.spec(PlainSpec)
    assert (plain.size, plain.tier) == (3, "basic")
    assert req.spec(OpenSpec).kw == {"size": 3, "added_later": {"x": 1}}
    # What the typed spec needs is still checked: a missing field is terminal.
    req = request_from_task(pb.StageTask(stage=pb.STAGE_WORK, reaction="work", work_req=pb.WorkRequest(
        resource=res(spec=b'{"tier": "gold"}'))), ProviderConfig())
    with pytest.raises(TerminalError, match="invalid spec"):
        req.spec(TypedSpec)
