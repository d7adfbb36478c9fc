"""Conversions between the wire (`StageTask`, `StageComplete`) and the SDK's value types,
plus turning a handler's result (or exception) into the `StageComplete` to send."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from ._proto import worker_pb2 as pb
from .descendants import RollupSummary
from .errors import HandlerError
from .types import (
    NIL_UUID,
    ChildSpec,
    Condition,
    DepEdge,
    Operation,
    Outcome,
    ProviderConfig,
    ProviderConfigSpec,
    ReactionRequest,
    Resource,
    ResourceRef,
    Stage,
    Transition,
    Trigger,
)

log = logging.getLogger("converge_sdk")


class MalformedTask(Exception):
    """A task that cannot be decoded; its message becomes a terminal failure."""


@dataclass(frozen=True)
class TaskEcho:
    """What a StageComplete must echo from its StageTask."""

    lease_token: str
    stage: Any
    claim_epoch: int

    @classmethod
    def of(cls, task: Any) -> TaskEcho:
        return cls(task.lease_token, task.stage, task.claim_epoch)


def wire_version(v: int) -> int:
    """A version on the wire where 0 means 1."""
    return v if v else 1


def _uuid(b: bytes) -> uuid.UUID | None:
    return uuid.UUID(bytes=bytes(b)) if len(b) == 16 else None


def _json(b: bytes, what: str) -> Any | None:
    if not b:
        return None
    try:
        return json.loads(b)
    except ValueError as e:
        raise MalformedTask(f"malformed {what} JSON: {e}") from None


def resource_from_pb(r: Any, what: str = "resource") -> Resource:
    """Decodes a wire Resource (spec defaults to `{}`)."""
    spec = _json(r.spec, f"{what} spec")
    return Resource(
        id=_uuid(r.id) or NIL_UUID,
        kind=r.kind,
        kind_version=wire_version(r.kind_version),
        name=r.name,
        owner_id=_uuid(r.owner_id),
        root_id=_uuid(r.root_id),
        spec={} if spec is None else spec,
        status=_json(r.status, f"{what} status"),
        generation=r.generation,
        synced_gen=r.synced_gen,
        is_ready=r.is_ready,
        phase=r.phase,
        labels=dict(r.labels),
        finalizers=list(r.finalizers),
    )


def summary_from_pb(s: Any) -> RollupSummary:
    """Decodes a wire RollupSummary."""
    return RollupSummary(
        total=s.total,
        by_phase=dict(s.by_phase),
        by_kind=dict(s.by_kind),
        failed=[ResourceRef(r.kind, r.name) for r in s.failed],
        not_ready=[ResourceRef(r.kind, r.name) for r in s.not_ready],
        failed_total=s.failed_total,
        not_ready_total=s.not_ready_total,
    )


_DEFAULT_TRIGGER = {
    Stage.ROLLUP: Trigger.CHILDREN_SETTLED,
    Stage.DELETE: Trigger.DELETE_REQUESTED,
    Stage.OPERATE: Trigger.OPERATION,
    Stage.REACT: Trigger.REACTOR,
}

_PAYLOAD = {
    Stage.COMPOSE: "compose_req",
    Stage.WORK: "work_req",
    Stage.ROLLUP: "rollup_req",
    Stage.DELETE: "delete_req",
    Stage.OPERATE: "operate_req",
    Stage.REACT: "react_req",
}


def _required(msg: Any, field: str, what: str) -> Resource:
    if not msg.HasField(field):
        raise MalformedTask(f"task payload has no {what}")
    return resource_from_pb(getattr(msg, field), what)


def request_from_task(
    task: Any,
    config: ProviderConfig,
    cancellation: asyncio.Event | None = None,
    deadline: float | None = None,
) -> ReactionRequest:
    """Decodes a StageTask; raises MalformedTask (a terminal failure) when it cannot."""
    if not task.reaction:
        raise MalformedTask("task has an empty reaction name")
    try:
        stage = Stage(task.stage)
    except ValueError:
        raise MalformedTask(f"task has unknown stage {task.stage}") from None
    if stage is Stage.UNSPECIFIED:
        raise MalformedTask(f"task has unknown stage {task.stage}")
    which = task.WhichOneof("request")
    if which is None:
        raise MalformedTask(f"task has no payload for stage {stage.proto_name}")
    if which != _PAYLOAD[stage]:
        raise MalformedTask(f"task payload does not match stage {stage.proto_name}")
    req = ReactionRequest(
        reaction=task.reaction,
        stage=stage,
        kind=task.kind,
        kind_version=wire_version(task.kind_version),
        resource=Resource(),
        trigger=task.trigger or _DEFAULT_TRIGGER.get(stage, Trigger.SPEC_CHANGE),
        generation=task.generation,
        attempt=task.attempt,
        deadline=deadline,
        cancellation=cancellation if cancellation is not None else asyncio.Event(),
        config=config,
        config_override=_json(task.provider_config, "provider_config override"),
        bundle_override=bytes(task.provider_bundle),
    )
    p = getattr(task, which)
    if stage is Stage.COMPOSE:
        req.resource = _required(p, "root", "root")
        req.observed = [resource_from_pb(r, "observed") for r in p.observed]
        req.dry_run = bool(task.dry_run)
    elif stage is Stage.WORK:
        req.resource = _required(p, "resource", "resource")
        req.status = _json(p.status, "status")
    elif stage is Stage.ROLLUP:
        req.resource = _required(p, "root", "root")
        req.descendants = [resource_from_pb(r, "descendant") for r in p.descendants]
        req.descendants_included = p.descendants_included
        req.summary = summary_from_pb(p.summary)  # an unset one reads as all zeros
        req.status = _json(p.status, "status")
    elif stage is Stage.DELETE:
        req.resource = _required(p, "resource", "resource")
    elif stage is Stage.OPERATE:
        req.resource = _required(p, "resource", "resource")
        if not p.HasField("operation"):
            raise MalformedTask("task payload has no operation")
        op = p.operation
        req.operation = Operation(
            verb=op.verb,
            input=_json(op.input, "operation input"),
            resource_id=_uuid(op.resource_id),
            attempts=op.attempts,
            requested_by=op.requested_by,
        )
    else:  # REACT
        req.resource = _required(p, "resource", "resource")
        req.transition = _transition(p.transition)
        req.dedup_token = p.dedup_token
    return req


def _transition(t: int) -> Transition | None:
    try:
        tr = Transition(t)
    except ValueError:
        return None
    return None if tr is Transition.UNSPECIFIED else tr


def _json_bytes(v: Any | None) -> bytes:
    if v is None:
        return b""
    return json.dumps(v, separators=(",", ":"), allow_nan=False).encode()


def _condition(c: Condition) -> Any:
    return pb.Condition(type=c.type, status=c.status, reason=c.reason, message=c.message)


def _child(c: ChildSpec) -> Any:
    if c.kind_version < 1:
        raise ValueError(
            f"child {c.kind}/{c.name} has kind_version {c.kind_version}; it must be at least 1"
        )
    return pb.ChildSpec(
        kind=c.kind,
        name=c.name,
        spec=_json_bytes(c.spec),
        labels=dict(c.labels),
        kind_version=c.kind_version,
    )


def _edge(e: DepEdge) -> Any:
    return pb.DepEdge(
        **{"from": pb.ResourceRef(kind=e.from_.kind, name=e.from_.name)},
        to=pb.ResourceRef(kind=e.to.kind, name=e.to.name),
        values=[
            pb.ValueFlow(dependent_field=v.dependent_field, source_field=v.source_field)
            for v in e.values
        ],
    )


def _config(c: ProviderConfigSpec) -> Any:
    if c.kind_version < 1:
        raise ValueError(
            f"provider config {c.name} has kind_version {c.kind_version}; it must be at least 1"
        )
    return pb.ProviderConfigSpec(
        name=c.name,
        kind=c.kind,
        is_default=c.is_default,
        spec=_json_bytes(c.spec),
        kind_version=c.kind_version,
    )


def complete_from_outcome(echo: TaskEcho, outcome: Outcome) -> Any:
    """Encodes a successful outcome; raises ValueError/TypeError when it cannot be encoded."""
    out = pb.StageComplete(
        lease_token=echo.lease_token,
        stage=echo.stage,
        claim_epoch=echo.claim_epoch,
        output=_json_bytes(outcome.output),
    )
    status = _json_bytes(outcome.status)
    conditions = [_condition(c) for c in outcome.conditions]
    if echo.stage == Stage.COMPOSE:
        out.compose.CopyFrom(
            pb.ComposeResult(
                desired=[_child(c) for c in outcome.children],
                edges=[_edge(e) for e in outcome.edges],
                configs=[_config(c) for c in outcome.configs],
                status=status,
                conditions=conditions,
            )
        )
    else:
        out.status = status
        out.conditions.extend(conditions)
    return out


def fail_complete(echo: TaskEcho, message: str, terminal: bool) -> Any:
    """Encodes a failure (an empty message would mean success, so it never is)."""
    return pb.StageComplete(
        lease_token=echo.lease_token,
        stage=echo.stage,
        claim_epoch=echo.claim_epoch,
        error_message=message or "handler failed",
        terminal=terminal,
    )


def result_complete(echo: TaskEcho, result: object) -> Any:
    """The StageComplete for a handler's return value or raised exception.

    An `Outcome` (or None, an empty outcome) is a success; `TerminalError` a terminal
    failure; `TransientError` and any other exception a transient failure with its message.
    """
    if isinstance(result, BaseException):
        if isinstance(result, HandlerError):
            return fail_complete(echo, result.message, result.terminal)
        msg = str(result) or type(result).__name__
        log.warning("handler raised %s: %s", type(result).__name__, msg)
        return fail_complete(echo, f"handler raised {type(result).__name__}: {msg}", False)
    if result is None:
        result = Outcome()
    if not isinstance(result, Outcome):
        return fail_complete(
            echo, f"handler returned {type(result).__name__}, expected an Outcome", True
        )
    try:
        return complete_from_outcome(echo, result)
    except (TypeError, ValueError) as e:
        return fail_complete(echo, f"cannot encode outcome: {e}", True)
