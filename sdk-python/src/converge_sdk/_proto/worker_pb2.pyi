from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Stage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STAGE_UNSPECIFIED: _ClassVar[Stage]
    STAGE_COMPOSE: _ClassVar[Stage]
    STAGE_WORK: _ClassVar[Stage]
    STAGE_ROLLUP: _ClassVar[Stage]
    STAGE_DELETE: _ClassVar[Stage]
    STAGE_OPERATE: _ClassVar[Stage]
    STAGE_REACT: _ClassVar[Stage]

class Transition(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSITION_UNSPECIFIED: _ClassVar[Transition]
    TRANSITION_CREATED: _ClassVar[Transition]
    TRANSITION_SYNCED: _ClassVar[Transition]
    TRANSITION_DEGRADED: _ClassVar[Transition]
    TRANSITION_FAILED: _ClassVar[Transition]
    TRANSITION_DELETED: _ClassVar[Transition]
STAGE_UNSPECIFIED: Stage
STAGE_COMPOSE: Stage
STAGE_WORK: Stage
STAGE_ROLLUP: Stage
STAGE_DELETE: Stage
STAGE_OPERATE: Stage
STAGE_REACT: Stage
TRANSITION_UNSPECIFIED: Transition
TRANSITION_CREATED: Transition
TRANSITION_SYNCED: Transition
TRANSITION_DEGRADED: Transition
TRANSITION_FAILED: Transition
TRANSITION_DELETED: Transition

class WorkStreamClientMsg(_message.Message):
    __slots__ = ("subscribe", "complete", "interest", "heartbeat")
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    INTEREST_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    subscribe: Subscribe
    complete: StageComplete
    interest: Interest
    heartbeat: WorkHeartbeat
    def __init__(self, subscribe: _Optional[_Union[Subscribe, _Mapping]] = ..., complete: _Optional[_Union[StageComplete, _Mapping]] = ..., interest: _Optional[_Union[Interest, _Mapping]] = ..., heartbeat: _Optional[_Union[WorkHeartbeat, _Mapping]] = ...) -> None: ...

class WorkStreamServerMsg(_message.Message):
    __slots__ = ("task", "config", "ack", "cancel", "drain")
    TASK_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    task: StageTask
    config: ProviderConfigUpdate
    ack: CompleteAck
    cancel: CancelTask
    drain: Drain
    def __init__(self, task: _Optional[_Union[StageTask, _Mapping]] = ..., config: _Optional[_Union[ProviderConfigUpdate, _Mapping]] = ..., ack: _Optional[_Union[CompleteAck, _Mapping]] = ..., cancel: _Optional[_Union[CancelTask, _Mapping]] = ..., drain: _Optional[_Union[Drain, _Mapping]] = ...) -> None: ...

class Subscribe(_message.Message):
    __slots__ = ("kinds", "max_inflight", "kind_versions", "resumed", "worker_name", "sdk", "dry_runs")
    KINDS_FIELD_NUMBER: _ClassVar[int]
    MAX_INFLIGHT_FIELD_NUMBER: _ClassVar[int]
    KIND_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    WORKER_NAME_FIELD_NUMBER: _ClassVar[int]
    SDK_FIELD_NUMBER: _ClassVar[int]
    DRY_RUNS_FIELD_NUMBER: _ClassVar[int]
    kinds: _containers.RepeatedScalarFieldContainer[str]
    max_inflight: int
    kind_versions: _containers.RepeatedScalarFieldContainer[int]
    resumed: _containers.RepeatedCompositeFieldContainer[ResumedTask]
    worker_name: str
    sdk: str
    dry_runs: bool
    def __init__(self, kinds: _Optional[_Iterable[str]] = ..., max_inflight: _Optional[int] = ..., kind_versions: _Optional[_Iterable[int]] = ..., resumed: _Optional[_Iterable[_Union[ResumedTask, _Mapping]]] = ..., worker_name: _Optional[str] = ..., sdk: _Optional[str] = ..., dry_runs: _Optional[bool] = ...) -> None: ...

class ResumedTask(_message.Message):
    __slots__ = ("lease_token", "claim_epoch")
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CLAIM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    lease_token: str
    claim_epoch: int
    def __init__(self, lease_token: _Optional[str] = ..., claim_epoch: _Optional[int] = ...) -> None: ...

class WorkHeartbeat(_message.Message):
    __slots__ = ("lease_token", "claim_epoch")
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CLAIM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    lease_token: _containers.RepeatedScalarFieldContainer[str]
    claim_epoch: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, lease_token: _Optional[_Iterable[str]] = ..., claim_epoch: _Optional[_Iterable[int]] = ...) -> None: ...

class Interest(_message.Message):
    __slots__ = ("kind", "credit", "has_worker", "kind_version")
    KIND_FIELD_NUMBER: _ClassVar[int]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    HAS_WORKER_FIELD_NUMBER: _ClassVar[int]
    KIND_VERSION_FIELD_NUMBER: _ClassVar[int]
    kind: str
    credit: int
    has_worker: bool
    kind_version: int
    def __init__(self, kind: _Optional[str] = ..., credit: _Optional[int] = ..., has_worker: _Optional[bool] = ..., kind_version: _Optional[int] = ...) -> None: ...

class ProviderConfigUpdate(_message.Message):
    __slots__ = ("kind", "kind_version", "config", "bundle")
    KIND_FIELD_NUMBER: _ClassVar[int]
    KIND_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    kind_version: int
    config: bytes
    bundle: bytes
    def __init__(self, kind: _Optional[str] = ..., kind_version: _Optional[int] = ..., config: _Optional[bytes] = ..., bundle: _Optional[bytes] = ...) -> None: ...

class StageTask(_message.Message):
    __slots__ = ("stage", "kind", "kind_version", "resource_id", "generation", "reaction", "lease_token", "claim_epoch", "manifest_version", "provider_config", "provider_bundle", "task_deadline_ms", "compose_req", "work_req", "rollup_req", "delete_req", "operate_req", "react_req", "trigger", "attempt", "dry_run")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    KIND_VERSION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    REACTION_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CLAIM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_CONFIG_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_BUNDLE_FIELD_NUMBER: _ClassVar[int]
    TASK_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    COMPOSE_REQ_FIELD_NUMBER: _ClassVar[int]
    WORK_REQ_FIELD_NUMBER: _ClassVar[int]
    ROLLUP_REQ_FIELD_NUMBER: _ClassVar[int]
    DELETE_REQ_FIELD_NUMBER: _ClassVar[int]
    OPERATE_REQ_FIELD_NUMBER: _ClassVar[int]
    REACT_REQ_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    stage: Stage
    kind: str
    kind_version: int
    resource_id: bytes
    generation: int
    reaction: str
    lease_token: str
    claim_epoch: int
    manifest_version: int
    provider_config: bytes
    provider_bundle: bytes
    task_deadline_ms: int
    compose_req: ComposeRequest
    work_req: WorkRequest
    rollup_req: RollupRequest
    delete_req: DeleteRequest
    operate_req: OperateRequest
    react_req: ReactRequest
    trigger: str
    attempt: int
    dry_run: bool
    def __init__(self, stage: _Optional[_Union[Stage, str]] = ..., kind: _Optional[str] = ..., kind_version: _Optional[int] = ..., resource_id: _Optional[bytes] = ..., generation: _Optional[int] = ..., reaction: _Optional[str] = ..., lease_token: _Optional[str] = ..., claim_epoch: _Optional[int] = ..., manifest_version: _Optional[int] = ..., provider_config: _Optional[bytes] = ..., provider_bundle: _Optional[bytes] = ..., task_deadline_ms: _Optional[int] = ..., compose_req: _Optional[_Union[ComposeRequest, _Mapping]] = ..., work_req: _Optional[_Union[WorkRequest, _Mapping]] = ..., rollup_req: _Optional[_Union[RollupRequest, _Mapping]] = ..., delete_req: _Optional[_Union[DeleteRequest, _Mapping]] = ..., operate_req: _Optional[_Union[OperateRequest, _Mapping]] = ..., react_req: _Optional[_Union[ReactRequest, _Mapping]] = ..., trigger: _Optional[str] = ..., attempt: _Optional[int] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class Resource(_message.Message):
    __slots__ = ("id", "kind", "name", "owner_id", "root_id", "spec", "status", "generation", "synced_gen", "is_ready", "finalizers", "deletion_requested_at_ms", "frozen_until_ms", "quarantined", "labels", "kind_version", "phase")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SYNCED_GEN_FIELD_NUMBER: _ClassVar[int]
    IS_READY_FIELD_NUMBER: _ClassVar[int]
    FINALIZERS_FIELD_NUMBER: _ClassVar[int]
    DELETION_REQUESTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FROZEN_UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    QUARANTINED_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    KIND_VERSION_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    id: bytes
    kind: str
    name: str
    owner_id: bytes
    root_id: bytes
    spec: bytes
    status: bytes
    generation: int
    synced_gen: int
    is_ready: bool
    finalizers: _containers.RepeatedScalarFieldContainer[str]
    deletion_requested_at_ms: int
    frozen_until_ms: int
    quarantined: bool
    labels: _containers.ScalarMap[str, str]
    kind_version: int
    phase: str
    def __init__(self, id: _Optional[bytes] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., owner_id: _Optional[bytes] = ..., root_id: _Optional[bytes] = ..., spec: _Optional[bytes] = ..., status: _Optional[bytes] = ..., generation: _Optional[int] = ..., synced_gen: _Optional[int] = ..., is_ready: _Optional[bool] = ..., finalizers: _Optional[_Iterable[str]] = ..., deletion_requested_at_ms: _Optional[int] = ..., frozen_until_ms: _Optional[int] = ..., quarantined: _Optional[bool] = ..., labels: _Optional[_Mapping[str, str]] = ..., kind_version: _Optional[int] = ..., phase: _Optional[str] = ...) -> None: ...

class ResourceRef(_message.Message):
    __slots__ = ("kind", "name")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ValueFlow(_message.Message):
    __slots__ = ("dependent_field", "source_field")
    DEPENDENT_FIELD_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_FIELD_NUMBER: _ClassVar[int]
    dependent_field: str
    source_field: str
    def __init__(self, dependent_field: _Optional[str] = ..., source_field: _Optional[str] = ...) -> None: ...

class ChildSpec(_message.Message):
    __slots__ = ("kind", "name", "spec", "labels", "kind_version")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    KIND_VERSION_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    spec: bytes
    labels: _containers.ScalarMap[str, str]
    kind_version: int
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., spec: _Optional[bytes] = ..., labels: _Optional[_Mapping[str, str]] = ..., kind_version: _Optional[int] = ...) -> None: ...

class DepEdge(_message.Message):
    __slots__ = ("to", "values")
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    to: ResourceRef
    values: _containers.RepeatedCompositeFieldContainer[ValueFlow]
    def __init__(self, to: _Optional[_Union[ResourceRef, _Mapping]] = ..., values: _Optional[_Iterable[_Union[ValueFlow, _Mapping]]] = ..., **kwargs) -> None: ...

class ProviderConfigSpec(_message.Message):
    __slots__ = ("name", "kind", "is_default", "spec", "kind_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    KIND_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    is_default: bool
    spec: bytes
    kind_version: int
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., is_default: _Optional[bool] = ..., spec: _Optional[bytes] = ..., kind_version: _Optional[int] = ...) -> None: ...

class Operation(_message.Message):
    __slots__ = ("resource_id", "verb", "input", "attempts", "requested_by")
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    VERB_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    resource_id: bytes
    verb: str
    input: bytes
    attempts: int
    requested_by: str
    def __init__(self, resource_id: _Optional[bytes] = ..., verb: _Optional[str] = ..., input: _Optional[bytes] = ..., attempts: _Optional[int] = ..., requested_by: _Optional[str] = ...) -> None: ...

class ComposeRequest(_message.Message):
    __slots__ = ("root", "observed", "desired", "edges", "configs")
    ROOT_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_FIELD_NUMBER: _ClassVar[int]
    DESIRED_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    root: Resource
    observed: _containers.RepeatedCompositeFieldContainer[Resource]
    desired: _containers.RepeatedCompositeFieldContainer[ChildSpec]
    edges: _containers.RepeatedCompositeFieldContainer[DepEdge]
    configs: _containers.RepeatedCompositeFieldContainer[ProviderConfigSpec]
    def __init__(self, root: _Optional[_Union[Resource, _Mapping]] = ..., observed: _Optional[_Iterable[_Union[Resource, _Mapping]]] = ..., desired: _Optional[_Iterable[_Union[ChildSpec, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[DepEdge, _Mapping]]] = ..., configs: _Optional[_Iterable[_Union[ProviderConfigSpec, _Mapping]]] = ...) -> None: ...

class WorkRequest(_message.Message):
    __slots__ = ("resource", "status")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    resource: Resource
    status: bytes
    def __init__(self, resource: _Optional[_Union[Resource, _Mapping]] = ..., status: _Optional[bytes] = ...) -> None: ...

class RollupRequest(_message.Message):
    __slots__ = ("root", "descendants", "status", "summary", "descendants_included")
    ROOT_FIELD_NUMBER: _ClassVar[int]
    DESCENDANTS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    DESCENDANTS_INCLUDED_FIELD_NUMBER: _ClassVar[int]
    root: Resource
    descendants: _containers.RepeatedCompositeFieldContainer[Resource]
    status: bytes
    summary: RollupSummary
    descendants_included: bool
    def __init__(self, root: _Optional[_Union[Resource, _Mapping]] = ..., descendants: _Optional[_Iterable[_Union[Resource, _Mapping]]] = ..., status: _Optional[bytes] = ..., summary: _Optional[_Union[RollupSummary, _Mapping]] = ..., descendants_included: _Optional[bool] = ...) -> None: ...

class RollupSummary(_message.Message):
    __slots__ = ("total", "by_phase", "by_kind", "failed", "not_ready", "failed_total", "not_ready_total")
    class ByPhaseEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class ByKindEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    BY_PHASE_FIELD_NUMBER: _ClassVar[int]
    BY_KIND_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    NOT_READY_FIELD_NUMBER: _ClassVar[int]
    FAILED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    NOT_READY_TOTAL_FIELD_NUMBER: _ClassVar[int]
    total: int
    by_phase: _containers.ScalarMap[str, int]
    by_kind: _containers.ScalarMap[str, int]
    failed: _containers.RepeatedCompositeFieldContainer[ResourceRef]
    not_ready: _containers.RepeatedCompositeFieldContainer[ResourceRef]
    failed_total: int
    not_ready_total: int
    def __init__(self, total: _Optional[int] = ..., by_phase: _Optional[_Mapping[str, int]] = ..., by_kind: _Optional[_Mapping[str, int]] = ..., failed: _Optional[_Iterable[_Union[ResourceRef, _Mapping]]] = ..., not_ready: _Optional[_Iterable[_Union[ResourceRef, _Mapping]]] = ..., failed_total: _Optional[int] = ..., not_ready_total: _Optional[int] = ...) -> None: ...

class ListDescendantsRequest(_message.Message):
    __slots__ = ("resource_id", "lease_token", "claim_epoch", "page_token", "page_size")
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CLAIM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    resource_id: bytes
    lease_token: str
    claim_epoch: int
    page_token: bytes
    page_size: int
    def __init__(self, resource_id: _Optional[bytes] = ..., lease_token: _Optional[str] = ..., claim_epoch: _Optional[int] = ..., page_token: _Optional[bytes] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListDescendantsResponse(_message.Message):
    __slots__ = ("descendants", "next_page_token")
    DESCENDANTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    descendants: _containers.RepeatedCompositeFieldContainer[Resource]
    next_page_token: bytes
    def __init__(self, descendants: _Optional[_Iterable[_Union[Resource, _Mapping]]] = ..., next_page_token: _Optional[bytes] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("resource",)
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    resource: Resource
    def __init__(self, resource: _Optional[_Union[Resource, _Mapping]] = ...) -> None: ...

class OperateRequest(_message.Message):
    __slots__ = ("resource", "operation")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    resource: Resource
    operation: Operation
    def __init__(self, resource: _Optional[_Union[Resource, _Mapping]] = ..., operation: _Optional[_Union[Operation, _Mapping]] = ...) -> None: ...

class ReactRequest(_message.Message):
    __slots__ = ("resource", "transition", "dedup_token")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TRANSITION_FIELD_NUMBER: _ClassVar[int]
    DEDUP_TOKEN_FIELD_NUMBER: _ClassVar[int]
    resource: Resource
    transition: Transition
    dedup_token: str
    def __init__(self, resource: _Optional[_Union[Resource, _Mapping]] = ..., transition: _Optional[_Union[Transition, str]] = ..., dedup_token: _Optional[str] = ...) -> None: ...

class Condition(_message.Message):
    __slots__ = ("type", "status", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ComposeResult(_message.Message):
    __slots__ = ("desired", "edges", "configs", "status", "conditions")
    DESIRED_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    desired: _containers.RepeatedCompositeFieldContainer[ChildSpec]
    edges: _containers.RepeatedCompositeFieldContainer[DepEdge]
    configs: _containers.RepeatedCompositeFieldContainer[ProviderConfigSpec]
    status: bytes
    conditions: _containers.RepeatedCompositeFieldContainer[Condition]
    def __init__(self, desired: _Optional[_Iterable[_Union[ChildSpec, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[DepEdge, _Mapping]]] = ..., configs: _Optional[_Iterable[_Union[ProviderConfigSpec, _Mapping]]] = ..., status: _Optional[bytes] = ..., conditions: _Optional[_Iterable[_Union[Condition, _Mapping]]] = ...) -> None: ...

class StageComplete(_message.Message):
    __slots__ = ("lease_token", "stage", "status", "conditions", "compose", "output", "error_message", "failed_stage", "terminal", "claim_epoch")
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    COMPOSE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FAILED_STAGE_FIELD_NUMBER: _ClassVar[int]
    TERMINAL_FIELD_NUMBER: _ClassVar[int]
    CLAIM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    lease_token: str
    stage: Stage
    status: bytes
    conditions: _containers.RepeatedCompositeFieldContainer[Condition]
    compose: ComposeResult
    output: bytes
    error_message: str
    failed_stage: int
    terminal: bool
    claim_epoch: int
    def __init__(self, lease_token: _Optional[str] = ..., stage: _Optional[_Union[Stage, str]] = ..., status: _Optional[bytes] = ..., conditions: _Optional[_Iterable[_Union[Condition, _Mapping]]] = ..., compose: _Optional[_Union[ComposeResult, _Mapping]] = ..., output: _Optional[bytes] = ..., error_message: _Optional[str] = ..., failed_stage: _Optional[int] = ..., terminal: _Optional[bool] = ..., claim_epoch: _Optional[int] = ...) -> None: ...

class CompleteAck(_message.Message):
    __slots__ = ("lease_token", "claim_epoch", "accepted")
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CLAIM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    lease_token: str
    claim_epoch: int
    accepted: bool
    def __init__(self, lease_token: _Optional[str] = ..., claim_epoch: _Optional[int] = ..., accepted: _Optional[bool] = ...) -> None: ...

class CancelTask(_message.Message):
    __slots__ = ("lease_token", "claim_epoch", "reason")
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CLAIM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    lease_token: str
    claim_epoch: int
    reason: str
    def __init__(self, lease_token: _Optional[str] = ..., claim_epoch: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Drain(_message.Message):
    __slots__ = ("reason", "deadline_ms")
    REASON_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    reason: str
    deadline_ms: int
    def __init__(self, reason: _Optional[str] = ..., deadline_ms: _Optional[int] = ...) -> None: ...

class GetProviderConfigRequest(_message.Message):
    __slots__ = ("kinds", "kind_versions")
    KINDS_FIELD_NUMBER: _ClassVar[int]
    KIND_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    kinds: _containers.RepeatedScalarFieldContainer[str]
    kind_versions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, kinds: _Optional[_Iterable[str]] = ..., kind_versions: _Optional[_Iterable[int]] = ...) -> None: ...

class GetProviderConfigResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[ProviderConfigEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[ProviderConfigEntry, _Mapping]]] = ...) -> None: ...

class ProviderConfigEntry(_message.Message):
    __slots__ = ("kind", "kind_version", "config", "bundle")
    KIND_FIELD_NUMBER: _ClassVar[int]
    KIND_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    kind_version: int
    config: bytes
    bundle: bytes
    def __init__(self, kind: _Optional[str] = ..., kind_version: _Optional[int] = ..., config: _Optional[bytes] = ..., bundle: _Optional[bytes] = ...) -> None: ...
