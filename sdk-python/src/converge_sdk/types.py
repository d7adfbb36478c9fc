"""The value types a provider sees and returns: requests, resources, outcomes, conditions.

They mirror the wire messages of `converge.worker.v1` with JSON already decoded, so a handler
never touches protobuf. The same vocabulary exists in the Rust and Go SDKs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from .descendants import (
    DEFAULT_PAGE_SIZE,
    RollupSummary,
    Subtree,
    checked_page_size,
    included_page,
    subtree_pages,
)
from .errors import TerminalError
from .merge import effective_bundle, effective_config

JSON = Any
"""A decoded JSON value (dict, list, str, int, float, bool or None)."""

T = TypeVar("T")

NIL_UUID: Final = uuid.UUID(int=0)

CONDITION_READY: Final = "Ready"
"""Condition type that feeds a resource's health."""
CONDITION_SYNCED: Final = "Synced"
"""Condition type derived by the core from synced_gen vs generation."""


class Trigger:
    """The wire spellings of `StageTask.trigger`: what fired a task."""

    SPEC_CHANGE: Final = "specChange"
    CHILDREN_SETTLED: Final = "childrenSettled"
    DELETE_REQUESTED: Final = "deleteRequested"
    OPERATION: Final = "operation"
    REACTOR: Final = "reactor"
    RESYNC: Final = "resync"


class CancelReason:
    """Why a task was cancelled (`ReactionRequest.cancel_reason`): the broker's CancelTask
    reasons, plus `deadline` when the worker's own copy of the deadline fires first and
    `shutdown` when the worker stops before the handler returned."""

    DELETED: Final = "deleted"
    QUARANTINED: Final = "quarantined"
    SUPERSEDED: Final = "superseded"
    DEADLINE: Final = "deadline"
    SHUTDOWN: Final = "shutdown"


class Stage(enum.IntEnum):
    """The pipeline step a task runs (values are the wire enum's numbers)."""

    UNSPECIFIED = 0
    COMPOSE = 1
    WORK = 2
    ROLLUP = 3
    DELETE = 4
    OPERATE = 5
    REACT = 6

    @property
    def proto_name(self) -> str:
        """The proto enum name, e.g. `STAGE_WORK`."""
        return f"STAGE_{self.name}"


class Transition(enum.IntEnum):
    """A lifecycle edge a reactor binding subscribes to (wire enum numbers)."""

    UNSPECIFIED = 0
    CREATED = 1
    SYNCED = 2
    DEGRADED = 3
    FAILED = 4
    DELETED = 5

    @property
    def proto_name(self) -> str:
        """The proto enum name, e.g. `TRANSITION_SYNCED`."""
        return f"TRANSITION_{self.name}"


@dataclass(frozen=True, order=True)
class KindVersion:
    """One (kind, kind_version) pair a provider serves; the version is at least 1."""

    kind: str
    version: int = 1

    def __str__(self) -> str:
        return f"{self.kind}@v{self.version}"


@dataclass
class ProviderConfig:
    """A kind's default provider config as pushed by the broker (both parts empty = none)."""

    spec: JSON | None = None
    bundle: bytes = b""

    def is_empty(self) -> bool:
        """Whether neither a spec nor a bundle is present (no config, or a deleted one)."""
        return self.spec is None and not self.bundle


@dataclass
class Resource:
    """A read-only view of one resource row."""

    id: uuid.UUID = NIL_UUID
    kind: str = ""
    kind_version: int = 1
    name: str = ""
    owner_id: uuid.UUID | None = None
    root_id: uuid.UUID | None = None
    spec: JSON = field(default_factory=dict)
    status: JSON | None = None
    generation: int = 0
    synced_gen: int = 0
    is_ready: bool = False
    phase: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    finalizers: list[str] = field(default_factory=list)


@dataclass
class Operation:
    """An imperative verb requested against a resource (STAGE_OPERATE)."""

    verb: str
    input: JSON | None = None
    resource_id: uuid.UUID | None = None
    attempts: int = 0
    requested_by: str = ""


@dataclass
class ReactionRequest:
    """Everything a handler gets for one task.

    `cancellation` is set when the task's deadline passes, the broker cancels the task or the
    worker stops; long handlers should watch it. `cancel_reason` says why once it is set (one
    of the `CancelReason` words: `deleted`, `quarantined` or `superseded` — the resource was
    deleted, quarantined, or its spec moved to a newer generation, which runs as its own task —
    `deadline` or `shutdown`); a cancelled task's result is never sent. `deadline` is a
    `time.monotonic()` instant (None = no deadline).

    A ROLLUP task carries `summary` (the subtree's counts and the refs that need attention)
    and, only when the kind's rollup reaction declares `"descendants": "full"`, every live
    descendant in `descendants` (then `descendants_included` is true). Otherwise a handler
    that needs the rows reads them with `descendant_pages` or `read_descendants`, which page
    through the broker's ListDescendants (`subtree` says where from).

    `dry_run` (COMPOSE only) marks a plan's dry run (`POST /api/v1/resources:plan`): compose
    as usual and return the outcome, which is compared with the stored children and never
    stored. A composer is meant to be pure; one that is not must skip its side effects then.
    """

    reaction: str
    stage: Stage
    kind: str
    resource: Resource
    kind_version: int = 1
    trigger: str = Trigger.SPEC_CHANGE
    status: JSON | None = None
    generation: int = 0
    attempt: int = 1
    deadline: float | None = None
    cancellation: asyncio.Event = field(default_factory=asyncio.Event)
    cancel_reason: str | None = None
    config: ProviderConfig = field(default_factory=ProviderConfig)
    config_override: JSON | None = None
    bundle_override: bytes = b""
    observed: list[Resource] = field(default_factory=list)
    descendants: list[Resource] = field(default_factory=list)
    descendants_included: bool = False
    summary: RollupSummary | None = None
    subtree: Subtree = field(default_factory=Subtree, compare=False)
    operation: Operation | None = None
    transition: Transition | None = None
    dedup_token: str = ""
    dry_run: bool = False

    def spec(self, cls: type[T] | None = None) -> Any:
        """The resource's spec: the JSON object itself, or `cls(**spec)` when `cls` is given.

        Keys `cls` does not take are ignored (the rule every converge SDK follows), so a kind
        can add an optional spec field without breaking the workers already deployed: for a
        dataclass, keys that are not `init` fields; for another class, keys its constructor
        has no parameter for (unless it takes `**kwargs`, which then gets every key).

        A spec that does not fit (not an object, or rejected by `cls`: a required field
        missing, a value it refuses) is a `TerminalError`: retrying cannot fix it, a spec
        change can.
        """
        spec = self.resource.spec
        if cls is None:
            return spec
        if not isinstance(spec, dict):
            raise TerminalError(f"invalid spec: expected an object, got {type(spec).__name__}")
        try:
            return cls(**_known_keys(cls, spec))
        except (TypeError, ValueError) as e:
            raise TerminalError(f"invalid spec: {e}") from e

    @property
    def cancelled(self) -> bool:
        """Whether the task has been cancelled (deadline, CancelTask or shutdown)."""
        return self.cancellation.is_set()

    def effective_config(self) -> JSON | None:
        """The default config deep-merged with the per-resource override (None when neither)."""
        return effective_config(self.config.spec, self.config_override)

    def effective_bundle(self) -> bytes:
        """The per-resource bundle override if non-empty, otherwise the default bundle."""
        return effective_bundle(self.config.bundle, self.bundle_override)

    def descendant_pages(self, page_size: int = DEFAULT_PAGE_SIZE) -> AsyncIterator[list[Resource]]:
        """Pages through the composite's live subtree (ROLLUP): `async for page in
        req.descendant_pages(100)` yields lists of at most `page_size` descendants (0 means
        500; the broker caps it at 2,000), every live descendant exactly once over all pages.

        With the full form (`descendants_included`) the one page is `descendants` and no call
        is made. Otherwise each page is one ListDescendants call on the connection the task
        arrived on, under the task's lease; a failed call raises TransientError (the task is
        retried), including when the lease is gone because the task was cancelled or
        superseded. A negative `page_size` is a ValueError.
        """
        size = checked_page_size(page_size)
        if self.descendants_included:
            return included_page(list(self.descendants))
        return subtree_pages(self.subtree, size)

    async def read_descendants(self) -> list[Resource]:
        """Every live descendant of the composite (all pages of `descendant_pages`, 500 a
        page); raises what the paged read raises."""
        return [d async for page in self.descendant_pages() for d in page]


@dataclass
class Condition:
    """A Kubernetes-style condition; only type `Ready` feeds health."""

    type: str
    status: str
    reason: str = ""
    message: str = ""

    @classmethod
    def ready(cls, ready: bool, reason: str = "", message: str = "") -> Condition:
        """A `Ready` condition, `True` or `False`."""
        return cls(CONDITION_READY, "True" if ready else "False", reason, message)


@dataclass(frozen=True)
class ResourceRef:
    """Names a resource by kind and name (an edge endpoint)."""

    kind: str
    name: str


@dataclass(frozen=True)
class ValueFlow:
    """Copies one upstream status field into one dependent spec field (JSON pointers)."""

    dependent_field: str
    source_field: str


@dataclass
class ChildSpec:
    """One desired child of a composite; `kind_version` must be at least 1."""

    kind: str
    kind_version: int
    name: str
    spec: JSON = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    def with_label(self, key: str, value: str) -> ChildSpec:
        """Adds a label (builder style)."""
        self.labels[key] = value
        return self


@dataclass
class DepEdge:
    """Orders two children: `from_` (the dependent) waits for `to` (the dependency)."""

    from_: ResourceRef
    to: ResourceRef
    values: list[ValueFlow] = field(default_factory=list)

    def with_value(self, flow: ValueFlow) -> DepEdge:
        """Adds a value flow (builder style)."""
        self.values.append(flow)
        return self


@dataclass
class ProviderConfigSpec:
    """A provider config emitted by a composer (owned by the root)."""

    name: str
    kind: str
    kind_version: int = 1
    is_default: bool = False
    spec: JSON = field(default_factory=dict)


@dataclass
class Outcome:
    """What a handler returns; the core applies only the parts the reaction's `emits` allows.

    An empty successful `children` list from a composer prunes every child: a composer that
    cannot compute its children must raise instead. `output` is the operation's output.
    """

    status: JSON | None = None
    conditions: list[Condition] = field(default_factory=list)
    children: list[ChildSpec] = field(default_factory=list)
    edges: list[DepEdge] = field(default_factory=list)
    configs: list[ProviderConfigSpec] = field(default_factory=list)
    output: JSON | None = None

    def with_status(self, status: JSON) -> Outcome:
        """Sets the status (builder style)."""
        self.status = status
        return self

    def with_output(self, output: JSON) -> Outcome:
        """Sets the operation output (builder style)."""
        self.output = output
        return self

    def with_condition(self, condition: Condition) -> Outcome:
        """Adds a condition (builder style)."""
        self.conditions.append(condition)
        return self

    def with_child(self, child: ChildSpec) -> Outcome:
        """Adds a desired child (builder style)."""
        self.children.append(child)
        return self

    def with_edge(self, edge: DepEdge) -> Outcome:
        """Adds a dependency edge (builder style)."""
        self.edges.append(edge)
        return self

    def with_config(self, config: ProviderConfigSpec) -> Outcome:
        """Adds a provider config (builder style)."""
        self.configs.append(config)
        return self


def _known_keys(cls: type[Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The entries of `spec` that `cls(**...)` takes by name (see `ReactionRequest.spec`)."""
    fields = getattr(cls, "model_fields", None)  # a pydantic model (no import needed)
    if dataclasses.is_dataclass(cls):
        names = {f.name for f in dataclasses.fields(cls) if f.init}
    elif isinstance(fields, dict):
        # Its constructor takes **data; a model that forbids extra keys would refuse the
        # spec's unknown ones, so keep only the fields (by name and by alias).
        names = set(fields) | {a for f in fields.values() if (a := getattr(f, "alias", None))}
    else:
        try:
            params = inspect.signature(cls).parameters.values()
        except (TypeError, ValueError):
            return spec
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return spec
        names = {
            p.name for p in params
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        }
    return {k: v for k, v in spec.items() if k in names}
