import type { GenEnum, GenFile, GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file converge/worker/v1/worker.proto.
 */
export declare const file_converge_worker_v1_worker: GenFile;
/**
 * WorkStreamClientMsg is one frame from a worker to the broker.
 *
 * @generated from message converge.worker.v1.WorkStreamClientMsg
 */
export type WorkStreamClientMsg = Message<"converge.worker.v1.WorkStreamClientMsg"> & {
    /**
     * The frame's payload; exactly one is set.
     *
     * @generated from oneof converge.worker.v1.WorkStreamClientMsg.body
     */
    body: {
        /**
         * Must be the first frame of every stream.
         *
         * @generated from field: converge.worker.v1.Subscribe subscribe = 1;
         */
        value: Subscribe;
        case: "subscribe";
    } | {
        /**
         * The result of one task.
         *
         * @generated from field: converge.worker.v1.StageComplete complete = 2;
         */
        value: StageComplete;
        case: "complete";
    } | {
        /**
         * A readiness flip for one (kind, kind_version).
         *
         * @generated from field: converge.worker.v1.Interest interest = 3;
         */
        value: Interest;
        case: "interest";
    } | {
        /**
         * The coalesced liveness attestation of every running task.
         *
         * @generated from field: converge.worker.v1.WorkHeartbeat heartbeat = 4;
         */
        value: WorkHeartbeat;
        case: "heartbeat";
    } | {
        case: undefined;
        value?: undefined;
    };
};
/**
 * Describes the message converge.worker.v1.WorkStreamClientMsg.
 * Use `create(WorkStreamClientMsgSchema)` to create a new message.
 */
export declare const WorkStreamClientMsgSchema: GenMessage<WorkStreamClientMsg>;
/**
 * WorkStreamServerMsg is one frame from the broker to a worker.
 *
 * @generated from message converge.worker.v1.WorkStreamServerMsg
 */
export type WorkStreamServerMsg = Message<"converge.worker.v1.WorkStreamServerMsg"> & {
    /**
     * The frame's payload; exactly one is set.
     *
     * @generated from oneof converge.worker.v1.WorkStreamServerMsg.body
     */
    body: {
        /**
         * A task to run.
         *
         * @generated from field: converge.worker.v1.StageTask task = 1;
         */
        value: StageTask;
        case: "task";
    } | {
        /**
         * The default provider config of a kind the worker serves (primed, then pushed on edit).
         *
         * @generated from field: converge.worker.v1.ProviderConfigUpdate config = 2;
         */
        value: ProviderConfigUpdate;
        case: "config";
    } | {
        /**
         * The broker's verdict on a StageComplete.
         *
         * @generated from field: converge.worker.v1.CompleteAck ack = 3;
         */
        value: CompleteAck;
        case: "ack";
    } | {
        /**
         * Stop running a task: its result will not be accepted.
         *
         * @generated from field: converge.worker.v1.CancelTask cancel = 4;
         */
        value: CancelTask;
        case: "cancel";
    } | {
        /**
         * The broker is stopping: finish in-flight work, send results, then reconnect.
         *
         * @generated from field: converge.worker.v1.Drain drain = 5;
         */
        value: Drain;
        case: "drain";
    } | {
        case: undefined;
        value?: undefined;
    };
};
/**
 * Describes the message converge.worker.v1.WorkStreamServerMsg.
 * Use `create(WorkStreamServerMsgSchema)` to create a new message.
 */
export declare const WorkStreamServerMsgSchema: GenMessage<WorkStreamServerMsg>;
/**
 * Subscribe opens a worker session and names what the worker serves.
 *
 * @generated from message converge.worker.v1.Subscribe
 */
export type Subscribe = Message<"converge.worker.v1.Subscribe"> & {
    /**
     * Kinds this worker serves; must not be empty.
     *
     * @generated from field: repeated string kinds = 1;
     */
    kinds: string[];
    /**
     * The most tasks the worker runs at once on this stream; 0 lets the broker choose.
     *
     * @generated from field: uint32 max_inflight = 2;
     */
    maxInflight: number;
    /**
     * Parallel to `kinds`: the version served for each kind; missing entries mean 1.
     *
     * @generated from field: repeated int32 kind_versions = 3;
     */
    kindVersions: number[];
    /**
     * Tasks from an earlier session that are still running or hold an unacked result.
     *
     * @generated from field: repeated converge.worker.v1.ResumedTask resumed = 4;
     */
    resumed: ResumedTask[];
    /**
     * Advisory display name of the worker (logs and the cluster view only; never trusted).
     *
     * @generated from field: string worker_name = 5;
     */
    workerName: string;
    /**
     * The SDK and version that built this worker, e.g. "rust/0.1.0".
     *
     * @generated from field: string sdk = 6;
     */
    sdk: string;
    /**
     * The worker honours `StageTask.dry_run`: it runs a dry-run compose task like any other
     * (the composer is pure) and answers it with a normal StageComplete. A broker sends dry
     * runs only to streams that set this; an older worker leaves it false and never gets one.
     *
     * @generated from field: bool dry_runs = 7;
     */
    dryRuns: boolean;
};
/**
 * Describes the message converge.worker.v1.Subscribe.
 * Use `create(SubscribeSchema)` to create a new message.
 */
export declare const SubscribeSchema: GenMessage<Subscribe>;
/**
 * ResumedTask names a lease the worker still holds after a reconnect.
 *
 * @generated from message converge.worker.v1.ResumedTask
 */
export type ResumedTask = Message<"converge.worker.v1.ResumedTask"> & {
    /**
     * The lease token from the original StageTask.
     *
     * @generated from field: string lease_token = 1;
     */
    leaseToken: string;
    /**
     * The claim epoch from the original StageTask.
     *
     * @generated from field: int64 claim_epoch = 2;
     */
    claimEpoch: bigint;
};
/**
 * Describes the message converge.worker.v1.ResumedTask.
 * Use `create(ResumedTaskSchema)` to create a new message.
 */
export declare const ResumedTaskSchema: GenMessage<ResumedTask>;
/**
 * WorkHeartbeat attests that the listed tasks are still running.
 *
 * @generated from message converge.worker.v1.WorkHeartbeat
 */
export type WorkHeartbeat = Message<"converge.worker.v1.WorkHeartbeat"> & {
    /**
     * Lease tokens of the running tasks.
     *
     * @generated from field: repeated string lease_token = 1;
     */
    leaseToken: string[];
    /**
     * Parallel to `lease_token`: each task's claim epoch.
     *
     * @generated from field: repeated int64 claim_epoch = 2;
     */
    claimEpoch: bigint[];
};
/**
 * Describes the message converge.worker.v1.WorkHeartbeat.
 * Use `create(WorkHeartbeatSchema)` to create a new message.
 */
export declare const WorkHeartbeatSchema: GenMessage<WorkHeartbeat>;
/**
 * Interest flips a worker's readiness for one (kind, kind_version) on this stream.
 *
 * @generated from message converge.worker.v1.Interest
 */
export type Interest = Message<"converge.worker.v1.Interest"> & {
    /**
     * The kind whose readiness changes.
     *
     * @generated from field: string kind = 1;
     */
    kind: string;
    /**
     * Unused on a worker stream (0); reserved for broker-to-broker credit.
     *
     * @generated from field: int32 credit = 2;
     */
    credit: number;
    /**
     * false: stop sending this pair's tasks; true: resume.
     *
     * @generated from field: bool has_worker = 3;
     */
    hasWorker: boolean;
    /**
     * The kind version whose readiness changes; 0 means 1.
     *
     * @generated from field: int32 kind_version = 4;
     */
    kindVersion: number;
};
/**
 * Describes the message converge.worker.v1.Interest.
 * Use `create(InterestSchema)` to create a new message.
 */
export declare const InterestSchema: GenMessage<Interest>;
/**
 * ProviderConfigUpdate carries a kind's whole default provider config.
 *
 * @generated from message converge.worker.v1.ProviderConfigUpdate
 */
export type ProviderConfigUpdate = Message<"converge.worker.v1.ProviderConfigUpdate"> & {
    /**
     * The kind the config belongs to.
     *
     * @generated from field: string kind = 1;
     */
    kind: string;
    /**
     * The kind version the config belongs to; 0 means 1.
     *
     * @generated from field: int32 kind_version = 2;
     */
    kindVersion: number;
    /**
     * The config spec JSON; empty means absent or deleted.
     *
     * @generated from field: bytes config = 3;
     */
    config: Uint8Array;
    /**
     * The config's opaque bundle; empty means absent.
     *
     * @generated from field: bytes bundle = 4;
     */
    bundle: Uint8Array;
};
/**
 * Describes the message converge.worker.v1.ProviderConfigUpdate.
 * Use `create(ProviderConfigUpdateSchema)` to create a new message.
 */
export declare const ProviderConfigUpdateSchema: GenMessage<ProviderConfigUpdate>;
/**
 * StageTask asks a worker to run one reaction of one resource.
 *
 * @generated from message converge.worker.v1.StageTask
 */
export type StageTask = Message<"converge.worker.v1.StageTask"> & {
    /**
     * The pipeline step to run.
     *
     * @generated from field: converge.worker.v1.Stage stage = 1;
     */
    stage: Stage;
    /**
     * The resource's kind.
     *
     * @generated from field: string kind = 2;
     */
    kind: string;
    /**
     * The resource's kind version.
     *
     * @generated from field: int32 kind_version = 3;
     */
    kindVersion: number;
    /**
     * The resource's id (16 bytes).
     *
     * @generated from field: bytes resource_id = 4;
     */
    resourceId: Uint8Array;
    /**
     * The spec generation this task reconciles.
     *
     * @generated from field: int64 generation = 5;
     */
    generation: bigint;
    /**
     * The name of the manifest reaction to run; the worker picks its handler by it.
     *
     * @generated from field: string reaction = 6;
     */
    reaction: string;
    /**
     * The lease of this claim; echo it on StageComplete and WorkHeartbeat.
     *
     * @generated from field: string lease_token = 7;
     */
    leaseToken: string;
    /**
     * The fencing epoch of this claim; echo it on StageComplete and WorkHeartbeat.
     *
     * @generated from field: int64 claim_epoch = 8;
     */
    claimEpoch: bigint;
    /**
     * Content hash of the kind manifest the task was queued under; 0 means none.
     *
     * @generated from field: int64 manifest_version = 9;
     */
    manifestVersion: bigint;
    /**
     * The per-resource provider config override spec (JSON); empty means use the default.
     *
     * @generated from field: bytes provider_config = 10;
     */
    providerConfig: Uint8Array;
    /**
     * The per-resource bundle override; empty means use the default bundle.
     *
     * @generated from field: bytes provider_bundle = 11;
     */
    providerBundle: Uint8Array;
    /**
     * Remaining time budget in milliseconds (at least 1 when a deadline exists); 0 = none.
     *
     * @generated from field: int64 task_deadline_ms = 12;
     */
    taskDeadlineMs: bigint;
    /**
     * The stage's request payload; exactly one is set and it matches `stage`.
     *
     * @generated from oneof converge.worker.v1.StageTask.request
     */
    request: {
        /**
         * Set for STAGE_COMPOSE.
         *
         * @generated from field: converge.worker.v1.ComposeRequest compose_req = 13;
         */
        value: ComposeRequest;
        case: "composeReq";
    } | {
        /**
         * Set for STAGE_WORK.
         *
         * @generated from field: converge.worker.v1.WorkRequest work_req = 14;
         */
        value: WorkRequest;
        case: "workReq";
    } | {
        /**
         * Set for STAGE_ROLLUP.
         *
         * @generated from field: converge.worker.v1.RollupRequest rollup_req = 15;
         */
        value: RollupRequest;
        case: "rollupReq";
    } | {
        /**
         * Set for STAGE_DELETE.
         *
         * @generated from field: converge.worker.v1.DeleteRequest delete_req = 16;
         */
        value: DeleteRequest;
        case: "deleteReq";
    } | {
        /**
         * Set for STAGE_OPERATE.
         *
         * @generated from field: converge.worker.v1.OperateRequest operate_req = 17;
         */
        value: OperateRequest;
        case: "operateReq";
    } | {
        /**
         * Set for STAGE_REACT.
         *
         * @generated from field: converge.worker.v1.ReactRequest react_req = 18;
         */
        value: ReactRequest;
        case: "reactReq";
    } | {
        case: undefined;
        value?: undefined;
    };
    /**
     * What fired the task: specChange, childrenSettled, deleteRequested, operation, reactor
     * or resync (tells a drift re-observe from a spec change).
     *
     * @generated from field: string trigger = 19;
     */
    trigger: string;
    /**
     * 1 for the first attempt at this generation, counting up with each retry.
     *
     * @generated from field: int32 attempt = 20;
     */
    attempt: number;
    /**
     * A plan, not a reconcile (only with STAGE_COMPOSE, only to a stream whose Subscribe set
     * `dry_runs`): the root's spec is the one an apply would store, nothing is stored, and the
     * broker keeps the answer out of every resource, edge, event and queue row (it goes back to
     * the API's `POST /api/v1/resources:plan`). The composer runs as usual and must have no
     * side effects; a worker that cannot promise that answers with an error. `resource_id` and
     * `generation` are those of the stored resource (empty and 0 for a create); the lease and
     * claim epoch are the dry run's own, echoed on StageComplete like any task's.
     *
     * @generated from field: bool dry_run = 21;
     */
    dryRun: boolean;
};
/**
 * Describes the message converge.worker.v1.StageTask.
 * Use `create(StageTaskSchema)` to create a new message.
 */
export declare const StageTaskSchema: GenMessage<StageTask>;
/**
 * Resource is a read-only view of one resource row.
 *
 * @generated from message converge.worker.v1.Resource
 */
export type Resource = Message<"converge.worker.v1.Resource"> & {
    /**
     * The resource id (16 bytes).
     *
     * @generated from field: bytes id = 1;
     */
    id: Uint8Array;
    /**
     * The resource kind.
     *
     * @generated from field: string kind = 2;
     */
    kind: string;
    /**
     * The resource name, unique within its kind.
     *
     * @generated from field: string name = 3;
     */
    name: string;
    /**
     * The composing parent's id; empty for a root.
     *
     * @generated from field: bytes owner_id = 4;
     */
    ownerId: Uint8Array;
    /**
     * The composition root's id; empty for a root.
     *
     * @generated from field: bytes root_id = 5;
     */
    rootId: Uint8Array;
    /**
     * The spec JSON.
     *
     * @generated from field: bytes spec = 6;
     */
    spec: Uint8Array;
    /**
     * The last applied status JSON.
     *
     * @generated from field: bytes status = 7;
     */
    status: Uint8Array;
    /**
     * The spec generation (bumped on every spec change).
     *
     * @generated from field: int64 generation = 8;
     */
    generation: bigint;
    /**
     * The last generation reconciled successfully.
     *
     * @generated from field: int64 synced_gen = 9;
     */
    syncedGen: bigint;
    /**
     * synced_gen >= generation, healthy, and not being deleted.
     *
     * @generated from field: bool is_ready = 10;
     */
    isReady: boolean;
    /**
     * Finalizers still guarding deletion.
     *
     * @generated from field: repeated string finalizers = 11;
     */
    finalizers: string[];
    /**
     * When deletion was requested; 0 = not being deleted.
     *
     * @generated from field: int64 deletion_requested_at_ms = 12;
     */
    deletionRequestedAtMs: bigint;
    /**
     * The orphan-grace deadline; 0 = not frozen.
     *
     * @generated from field: int64 frozen_until_ms = 13;
     */
    frozenUntilMs: bigint;
    /**
     * Set aside by an operator.
     *
     * @generated from field: bool quarantined = 14;
     */
    quarantined: boolean;
    /**
     * Opaque labels.
     *
     * @generated from field: map<string, string> labels = 15;
     */
    labels: {
        [key: string]: string;
    };
    /**
     * The resource's kind version.
     *
     * @generated from field: int32 kind_version = 16;
     */
    kindVersion: number;
    /**
     * The derived phase: Ready, Reconciling, Degraded, Failed, Deleting, Orphaned, Quarantined.
     *
     * @generated from field: string phase = 17;
     */
    phase: string;
};
/**
 * Describes the message converge.worker.v1.Resource.
 * Use `create(ResourceSchema)` to create a new message.
 */
export declare const ResourceSchema: GenMessage<Resource>;
/**
 * ResourceRef names a resource by kind and name.
 *
 * @generated from message converge.worker.v1.ResourceRef
 */
export type ResourceRef = Message<"converge.worker.v1.ResourceRef"> & {
    /**
     * The kind.
     *
     * @generated from field: string kind = 1;
     */
    kind: string;
    /**
     * The name.
     *
     * @generated from field: string name = 2;
     */
    name: string;
};
/**
 * Describes the message converge.worker.v1.ResourceRef.
 * Use `create(ResourceRefSchema)` to create a new message.
 */
export declare const ResourceRefSchema: GenMessage<ResourceRef>;
/**
 * ValueFlow copies one upstream status field into one dependent spec field.
 *
 * @generated from message converge.worker.v1.ValueFlow
 */
export type ValueFlow = Message<"converge.worker.v1.ValueFlow"> & {
    /**
     * JSON pointer into the dependent's spec.
     *
     * @generated from field: string dependent_field = 1;
     */
    dependentField: string;
    /**
     * JSON pointer into the upstream's status.
     *
     * @generated from field: string source_field = 2;
     */
    sourceField: string;
};
/**
 * Describes the message converge.worker.v1.ValueFlow.
 * Use `create(ValueFlowSchema)` to create a new message.
 */
export declare const ValueFlowSchema: GenMessage<ValueFlow>;
/**
 * ChildSpec is one desired child of a composite.
 *
 * @generated from message converge.worker.v1.ChildSpec
 */
export type ChildSpec = Message<"converge.worker.v1.ChildSpec"> & {
    /**
     * The child's kind.
     *
     * @generated from field: string kind = 1;
     */
    kind: string;
    /**
     * The child's name.
     *
     * @generated from field: string name = 2;
     */
    name: string;
    /**
     * The child's spec JSON.
     *
     * @generated from field: bytes spec = 3;
     */
    spec: Uint8Array;
    /**
     * The child's labels.
     *
     * @generated from field: map<string, string> labels = 4;
     */
    labels: {
        [key: string]: string;
    };
    /**
     * The child's kind version; must be at least 1.
     *
     * @generated from field: int32 kind_version = 5;
     */
    kindVersion: number;
};
/**
 * Describes the message converge.worker.v1.ChildSpec.
 * Use `create(ChildSpecSchema)` to create a new message.
 */
export declare const ChildSpecSchema: GenMessage<ChildSpec>;
/**
 * DepEdge orders two children and optionally carries value flows between them.
 *
 * @generated from message converge.worker.v1.DepEdge
 */
export type DepEdge = Message<"converge.worker.v1.DepEdge"> & {
    /**
     * The dependent.
     *
     * @generated from field: converge.worker.v1.ResourceRef from = 1;
     */
    from?: ResourceRef | undefined;
    /**
     * The dependency (upstream).
     *
     * @generated from field: converge.worker.v1.ResourceRef to = 2;
     */
    to?: ResourceRef | undefined;
    /**
     * Fields copied from the upstream's status into the dependent's spec.
     *
     * @generated from field: repeated converge.worker.v1.ValueFlow values = 3;
     */
    values: ValueFlow[];
};
/**
 * Describes the message converge.worker.v1.DepEdge.
 * Use `create(DepEdgeSchema)` to create a new message.
 */
export declare const DepEdgeSchema: GenMessage<DepEdge>;
/**
 * ProviderConfigSpec is a provider config emitted by a composer.
 *
 * @generated from message converge.worker.v1.ProviderConfigSpec
 */
export type ProviderConfigSpec = Message<"converge.worker.v1.ProviderConfigSpec"> & {
    /**
     * The config's global name.
     *
     * @generated from field: string name = 1;
     */
    name: string;
    /**
     * The kind it configures.
     *
     * @generated from field: string kind = 2;
     */
    kind: string;
    /**
     * Whether it is the kind's default config.
     *
     * @generated from field: bool is_default = 3;
     */
    isDefault: boolean;
    /**
     * The config spec JSON.
     *
     * @generated from field: bytes spec = 4;
     */
    spec: Uint8Array;
    /**
     * The kind version it configures; must be at least 1.
     *
     * @generated from field: int32 kind_version = 5;
     */
    kindVersion: number;
};
/**
 * Describes the message converge.worker.v1.ProviderConfigSpec.
 * Use `create(ProviderConfigSpecSchema)` to create a new message.
 */
export declare const ProviderConfigSpecSchema: GenMessage<ProviderConfigSpec>;
/**
 * Operation is an imperative verb requested against a resource.
 *
 * @generated from message converge.worker.v1.Operation
 */
export type Operation = Message<"converge.worker.v1.Operation"> & {
    /**
     * The target resource's id.
     *
     * @generated from field: bytes resource_id = 1;
     */
    resourceId: Uint8Array;
    /**
     * The verb, as declared by the kind's manifest.
     *
     * @generated from field: string verb = 2;
     */
    verb: string;
    /**
     * The verb's input JSON.
     *
     * @generated from field: bytes input = 3;
     */
    input: Uint8Array;
    /**
     * How many times the operation has been attempted.
     *
     * @generated from field: int32 attempts = 4;
     */
    attempts: number;
    /**
     * Who requested it.
     *
     * @generated from field: string requested_by = 5;
     */
    requestedBy: string;
};
/**
 * Describes the message converge.worker.v1.Operation.
 * Use `create(OperationSchema)` to create a new message.
 */
export declare const OperationSchema: GenMessage<Operation>;
/**
 * ComposeRequest asks a composer for the desired children of `root`.
 *
 * @generated from message converge.worker.v1.ComposeRequest
 */
export type ComposeRequest = Message<"converge.worker.v1.ComposeRequest"> & {
    /**
     * The composite being composed.
     *
     * @generated from field: converge.worker.v1.Resource root = 1;
     */
    root?: Resource | undefined;
    /**
     * The children the root currently owns.
     *
     * @generated from field: repeated converge.worker.v1.Resource observed = 2;
     */
    observed: Resource[];
    /**
     * Unused by the broker; kept for symmetry with ComposeResult.
     *
     * @generated from field: repeated converge.worker.v1.ChildSpec desired = 3;
     */
    desired: ChildSpec[];
    /**
     * Unused by the broker; kept for symmetry with ComposeResult.
     *
     * @generated from field: repeated converge.worker.v1.DepEdge edges = 4;
     */
    edges: DepEdge[];
    /**
     * Unused by the broker; kept for symmetry with ComposeResult.
     *
     * @generated from field: repeated converge.worker.v1.ProviderConfigSpec configs = 5;
     */
    configs: ProviderConfigSpec[];
};
/**
 * Describes the message converge.worker.v1.ComposeRequest.
 * Use `create(ComposeRequestSchema)` to create a new message.
 */
export declare const ComposeRequestSchema: GenMessage<ComposeRequest>;
/**
 * WorkRequest asks a worker to reconcile one resource.
 *
 * @generated from message converge.worker.v1.WorkRequest
 */
export type WorkRequest = Message<"converge.worker.v1.WorkRequest"> & {
    /**
     * The resource.
     *
     * @generated from field: converge.worker.v1.Resource resource = 1;
     */
    resource?: Resource | undefined;
    /**
     * Status accumulated so far in this reconcile.
     *
     * @generated from field: bytes status = 2;
     */
    status: Uint8Array;
};
/**
 * Describes the message converge.worker.v1.WorkRequest.
 * Use `create(WorkRequestSchema)` to create a new message.
 */
export declare const WorkRequestSchema: GenMessage<WorkRequest>;
/**
 * RollupRequest asks for the aggregate status of a settled composite.
 *
 * @generated from message converge.worker.v1.RollupRequest
 */
export type RollupRequest = Message<"converge.worker.v1.RollupRequest"> & {
    /**
     * The composite root.
     *
     * @generated from field: converge.worker.v1.Resource root = 1;
     */
    root?: Resource | undefined;
    /**
     * Its whole live subtree, only when the kind's rollup reaction declares
     * `"descendants": "full"` (see `descendants_included`); otherwise empty, and a handler
     * that needs the rows pages through them with ListDescendants.
     *
     * @generated from field: repeated converge.worker.v1.Resource descendants = 2;
     */
    descendants: Resource[];
    /**
     * Status accumulated so far in this reconcile.
     *
     * @generated from field: bytes status = 3;
     */
    status: Uint8Array;
    /**
     * Counts and the refs that need attention, always set; cheap to compute and to send
     * whatever the size of the subtree.
     *
     * @generated from field: converge.worker.v1.RollupSummary summary = 4;
     */
    summary?: RollupSummary | undefined;
    /**
     * Whether `descendants` carries the whole live subtree (the full form).
     *
     * @generated from field: bool descendants_included = 5;
     */
    descendantsIncluded: boolean;
};
/**
 * Describes the message converge.worker.v1.RollupRequest.
 * Use `create(RollupRequestSchema)` to create a new message.
 */
export declare const RollupRequestSchema: GenMessage<RollupRequest>;
/**
 * RollupSummary describes a composite's live subtree without shipping it.
 *
 * @generated from message converge.worker.v1.RollupSummary
 */
export type RollupSummary = Message<"converge.worker.v1.RollupSummary"> & {
    /**
     * How many live descendants there are.
     *
     * @generated from field: int64 total = 1;
     */
    total: bigint;
    /**
     * Live descendants per phase (Ready, Reconciling, Degraded, Failed, ...).
     *
     * @generated from field: map<string, int64> by_phase = 2;
     */
    byPhase: {
        [key: string]: bigint;
    };
    /**
     * Live descendants per kind.
     *
     * @generated from field: map<string, int64> by_kind = 3;
     */
    byKind: {
        [key: string]: bigint;
    };
    /**
     * The first failed descendants in (kind, name) order, at most 100.
     *
     * @generated from field: repeated converge.worker.v1.ResourceRef failed = 4;
     */
    failed: ResourceRef[];
    /**
     * The first descendants that are not ready, in (kind, name) order, at most 100.
     *
     * @generated from field: repeated converge.worker.v1.ResourceRef not_ready = 5;
     */
    notReady: ResourceRef[];
    /**
     * How many descendants are failed (`failed` may list fewer).
     *
     * @generated from field: int64 failed_total = 6;
     */
    failedTotal: bigint;
    /**
     * How many descendants are not ready (`not_ready` may list fewer).
     *
     * @generated from field: int64 not_ready_total = 7;
     */
    notReadyTotal: bigint;
};
/**
 * Describes the message converge.worker.v1.RollupSummary.
 * Use `create(RollupSummarySchema)` to create a new message.
 */
export declare const RollupSummarySchema: GenMessage<RollupSummary>;
/**
 * ListDescendantsRequest asks for one page of a rollup task's descendants.
 *
 * @generated from message converge.worker.v1.ListDescendantsRequest
 */
export type ListDescendantsRequest = Message<"converge.worker.v1.ListDescendantsRequest"> & {
    /**
     * The composite (16 bytes): the ROLLUP task's resource_id.
     *
     * @generated from field: bytes resource_id = 1;
     */
    resourceId: Uint8Array;
    /**
     * The task's lease; a lease that is no longer current is refused (FAILED_PRECONDITION).
     *
     * @generated from field: string lease_token = 2;
     */
    leaseToken: string;
    /**
     * The task's claim epoch.
     *
     * @generated from field: int64 claim_epoch = 3;
     */
    claimEpoch: bigint;
    /**
     * Empty for the first page; then the previous response's `next_page_token`.
     *
     * @generated from field: bytes page_token = 4;
     */
    pageToken: Uint8Array;
    /**
     * Most descendants to return; 0 means 500, and more than 2,000 is read as 2,000.
     *
     * @generated from field: uint32 page_size = 5;
     */
    pageSize: number;
};
/**
 * Describes the message converge.worker.v1.ListDescendantsRequest.
 * Use `create(ListDescendantsRequestSchema)` to create a new message.
 */
export declare const ListDescendantsRequestSchema: GenMessage<ListDescendantsRequest>;
/**
 * ListDescendantsResponse is one page of descendants, in a stable order: reading every page
 * once yields every live descendant exactly once.
 *
 * @generated from message converge.worker.v1.ListDescendantsResponse
 */
export type ListDescendantsResponse = Message<"converge.worker.v1.ListDescendantsResponse"> & {
    /**
     * This page's descendants.
     *
     * @generated from field: repeated converge.worker.v1.Resource descendants = 1;
     */
    descendants: Resource[];
    /**
     * Pass to the next call; empty when this was the last page.
     *
     * @generated from field: bytes next_page_token = 2;
     */
    nextPageToken: Uint8Array;
};
/**
 * Describes the message converge.worker.v1.ListDescendantsResponse.
 * Use `create(ListDescendantsResponseSchema)` to create a new message.
 */
export declare const ListDescendantsResponseSchema: GenMessage<ListDescendantsResponse>;
/**
 * DeleteRequest asks a finalizer to tear a resource down.
 *
 * @generated from message converge.worker.v1.DeleteRequest
 */
export type DeleteRequest = Message<"converge.worker.v1.DeleteRequest"> & {
    /**
     * The resource being deleted.
     *
     * @generated from field: converge.worker.v1.Resource resource = 1;
     */
    resource?: Resource | undefined;
};
/**
 * Describes the message converge.worker.v1.DeleteRequest.
 * Use `create(DeleteRequestSchema)` to create a new message.
 */
export declare const DeleteRequestSchema: GenMessage<DeleteRequest>;
/**
 * OperateRequest asks a worker to run a verb.
 *
 * @generated from message converge.worker.v1.OperateRequest
 */
export type OperateRequest = Message<"converge.worker.v1.OperateRequest"> & {
    /**
     * The target resource.
     *
     * @generated from field: converge.worker.v1.Resource resource = 1;
     */
    resource?: Resource | undefined;
    /**
     * The operation to run.
     *
     * @generated from field: converge.worker.v1.Operation operation = 2;
     */
    operation?: Operation | undefined;
};
/**
 * Describes the message converge.worker.v1.OperateRequest.
 * Use `create(OperateRequestSchema)` to create a new message.
 */
export declare const OperateRequestSchema: GenMessage<OperateRequest>;
/**
 * ReactRequest asks a reactor to act on a watched resource's transition.
 *
 * @generated from message converge.worker.v1.ReactRequest
 */
export type ReactRequest = Message<"converge.worker.v1.ReactRequest"> & {
    /**
     * The watched resource.
     *
     * @generated from field: converge.worker.v1.Resource resource = 1;
     */
    resource?: Resource | undefined;
    /**
     * The transition that fired.
     *
     * @generated from field: converge.worker.v1.Transition transition = 2;
     */
    transition: Transition;
    /**
     * Stable key `<id>:<transition>:<generation>:<binding>` for idempotent side effects.
     *
     * @generated from field: string dedup_token = 3;
     */
    dedupToken: string;
};
/**
 * Describes the message converge.worker.v1.ReactRequest.
 * Use `create(ReactRequestSchema)` to create a new message.
 */
export declare const ReactRequestSchema: GenMessage<ReactRequest>;
/**
 * Condition is a Kubernetes-style condition reported by a handler.
 *
 * @generated from message converge.worker.v1.Condition
 */
export type Condition = Message<"converge.worker.v1.Condition"> & {
    /**
     * "Ready", "Synced" or a custom type; only Ready feeds health.
     *
     * @generated from field: string type = 1;
     */
    type: string;
    /**
     * "True", "False" or "Unknown".
     *
     * @generated from field: string status = 2;
     */
    status: string;
    /**
     * A short CamelCase reason.
     *
     * @generated from field: string reason = 3;
     */
    reason: string;
    /**
     * A human-readable message.
     *
     * @generated from field: string message = 4;
     */
    message: string;
};
/**
 * Describes the message converge.worker.v1.Condition.
 * Use `create(ConditionSchema)` to create a new message.
 */
export declare const ConditionSchema: GenMessage<Condition>;
/**
 * ComposeResult is what a composer returns.
 *
 * @generated from message converge.worker.v1.ComposeResult
 */
export type ComposeResult = Message<"converge.worker.v1.ComposeResult"> & {
    /**
     * The desired children (an empty successful list prunes every child).
     *
     * @generated from field: repeated converge.worker.v1.ChildSpec desired = 1;
     */
    desired: ChildSpec[];
    /**
     * Dependency edges between the children.
     *
     * @generated from field: repeated converge.worker.v1.DepEdge edges = 2;
     */
    edges: DepEdge[];
    /**
     * Provider configs owned by the root.
     *
     * @generated from field: repeated converge.worker.v1.ProviderConfigSpec configs = 3;
     */
    configs: ProviderConfigSpec[];
    /**
     * The composite's status JSON.
     *
     * @generated from field: bytes status = 4;
     */
    status: Uint8Array;
    /**
     * The composite's conditions.
     *
     * @generated from field: repeated converge.worker.v1.Condition conditions = 5;
     */
    conditions: Condition[];
};
/**
 * Describes the message converge.worker.v1.ComposeResult.
 * Use `create(ComposeResultSchema)` to create a new message.
 */
export declare const ComposeResultSchema: GenMessage<ComposeResult>;
/**
 * StageComplete reports the result of one task.
 *
 * @generated from message converge.worker.v1.StageComplete
 */
export type StageComplete = Message<"converge.worker.v1.StageComplete"> & {
    /**
     * Echo of StageTask.lease_token.
     *
     * @generated from field: string lease_token = 1;
     */
    leaseToken: string;
    /**
     * Echo of StageTask.stage.
     *
     * @generated from field: converge.worker.v1.Stage stage = 2;
     */
    stage: Stage;
    /**
     * Observed status JSON (WORK, ROLLUP, REACT).
     *
     * @generated from field: bytes status = 3;
     */
    status: Uint8Array;
    /**
     * Reported conditions.
     *
     * @generated from field: repeated converge.worker.v1.Condition conditions = 4;
     */
    conditions: Condition[];
    /**
     * The compose result (COMPOSE).
     *
     * @generated from field: converge.worker.v1.ComposeResult compose = 5;
     */
    compose?: ComposeResult | undefined;
    /**
     * Operation output JSON (OPERATE).
     *
     * @generated from field: bytes output = 6;
     */
    output: Uint8Array;
    /**
     * Non-empty means the task failed with this message.
     *
     * @generated from field: string error_message = 7;
     */
    errorMessage: string;
    /**
     * Index of the failing handler in the chain; 0 for a single provider.
     *
     * @generated from field: int32 failed_stage = 8;
     */
    failedStage: number;
    /**
     * With a failure: stop retrying until the spec changes.
     *
     * @generated from field: bool terminal = 9;
     */
    terminal: boolean;
    /**
     * Echo of StageTask.claim_epoch.
     *
     * @generated from field: int64 claim_epoch = 10;
     */
    claimEpoch: bigint;
};
/**
 * Describes the message converge.worker.v1.StageComplete.
 * Use `create(StageCompleteSchema)` to create a new message.
 */
export declare const StageCompleteSchema: GenMessage<StageComplete>;
/**
 * CompleteAck tells the worker whether its StageComplete was recorded.
 *
 * @generated from message converge.worker.v1.CompleteAck
 */
export type CompleteAck = Message<"converge.worker.v1.CompleteAck"> & {
    /**
     * The lease the ack is for.
     *
     * @generated from field: string lease_token = 1;
     */
    leaseToken: string;
    /**
     * The claim epoch the ack is for.
     *
     * @generated from field: int64 claim_epoch = 2;
     */
    claimEpoch: bigint;
    /**
     * false: the result was stale or fenced; drop it and do not retry.
     *
     * @generated from field: bool accepted = 3;
     */
    accepted: boolean;
};
/**
 * Describes the message converge.worker.v1.CompleteAck.
 * Use `create(CompleteAckSchema)` to create a new message.
 */
export declare const CompleteAckSchema: GenMessage<CompleteAck>;
/**
 * CancelTask tells the worker to stop a running task; its result will be refused.
 *
 * @generated from message converge.worker.v1.CancelTask
 */
export type CancelTask = Message<"converge.worker.v1.CancelTask"> & {
    /**
     * The lease to cancel.
     *
     * @generated from field: string lease_token = 1;
     */
    leaseToken: string;
    /**
     * The claim epoch to cancel.
     *
     * @generated from field: int64 claim_epoch = 2;
     */
    claimEpoch: bigint;
    /**
     * Why: deadline, deleted, quarantined or superseded.
     *
     * @generated from field: string reason = 3;
     */
    reason: string;
};
/**
 * Describes the message converge.worker.v1.CancelTask.
 * Use `create(CancelTaskSchema)` to create a new message.
 */
export declare const CancelTaskSchema: GenMessage<CancelTask>;
/**
 * Drain tells the worker the broker is stopping.
 *
 * @generated from message converge.worker.v1.Drain
 */
export type Drain = Message<"converge.worker.v1.Drain"> & {
    /**
     * Why the broker is stopping.
     *
     * @generated from field: string reason = 1;
     */
    reason: string;
    /**
     * When the broker stops waiting for results (ms since epoch).
     *
     * @generated from field: int64 deadline_ms = 2;
     */
    deadlineMs: bigint;
};
/**
 * Describes the message converge.worker.v1.Drain.
 * Use `create(DrainSchema)` to create a new message.
 */
export declare const DrainSchema: GenMessage<Drain>;
/**
 * GetProviderConfigRequest names the (kind, kind_version) pairs whose defaults to return.
 *
 * @generated from message converge.worker.v1.GetProviderConfigRequest
 */
export type GetProviderConfigRequest = Message<"converge.worker.v1.GetProviderConfigRequest"> & {
    /**
     * The kinds.
     *
     * @generated from field: repeated string kinds = 1;
     */
    kinds: string[];
    /**
     * Parallel to `kinds`; missing entries mean 1.
     *
     * @generated from field: repeated int32 kind_versions = 2;
     */
    kindVersions: number[];
};
/**
 * Describes the message converge.worker.v1.GetProviderConfigRequest.
 * Use `create(GetProviderConfigRequestSchema)` to create a new message.
 */
export declare const GetProviderConfigRequestSchema: GenMessage<GetProviderConfigRequest>;
/**
 * GetProviderConfigResponse lists the default configs that exist.
 *
 * @generated from message converge.worker.v1.GetProviderConfigResponse
 */
export type GetProviderConfigResponse = Message<"converge.worker.v1.GetProviderConfigResponse"> & {
    /**
     * One entry per pair that has a config or a bundle.
     *
     * @generated from field: repeated converge.worker.v1.ProviderConfigEntry entries = 1;
     */
    entries: ProviderConfigEntry[];
};
/**
 * Describes the message converge.worker.v1.GetProviderConfigResponse.
 * Use `create(GetProviderConfigResponseSchema)` to create a new message.
 */
export declare const GetProviderConfigResponseSchema: GenMessage<GetProviderConfigResponse>;
/**
 * ProviderConfigEntry is one kind's default provider config.
 *
 * @generated from message converge.worker.v1.ProviderConfigEntry
 */
export type ProviderConfigEntry = Message<"converge.worker.v1.ProviderConfigEntry"> & {
    /**
     * The kind.
     *
     * @generated from field: string kind = 1;
     */
    kind: string;
    /**
     * The kind version.
     *
     * @generated from field: int32 kind_version = 2;
     */
    kindVersion: number;
    /**
     * The config spec JSON.
     *
     * @generated from field: bytes config = 3;
     */
    config: Uint8Array;
    /**
     * The bundle.
     *
     * @generated from field: bytes bundle = 4;
     */
    bundle: Uint8Array;
};
/**
 * Describes the message converge.worker.v1.ProviderConfigEntry.
 * Use `create(ProviderConfigEntrySchema)` to create a new message.
 */
export declare const ProviderConfigEntrySchema: GenMessage<ProviderConfigEntry>;
/**
 * Stage names the step of the reconcile pipeline a task asks the worker to run.
 *
 * @generated from enum converge.worker.v1.Stage
 */
export declare enum Stage {
    /**
     * Never sent; a task with this stage is malformed.
     *
     * @generated from enum value: STAGE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Produce desired children, dependency edges and configs for a composite resource.
     *
     * @generated from enum value: STAGE_COMPOSE = 1;
     */
    COMPOSE = 1,
    /**
     * Reconcile a resource against the outside world and report observed status.
     *
     * @generated from enum value: STAGE_WORK = 2;
     */
    WORK = 2,
    /**
     * Aggregate the status of a composite once its descendants have settled.
     *
     * @generated from enum value: STAGE_ROLLUP = 3;
     */
    ROLLUP = 3,
    /**
     * Tear down what a finalizer guards before the resource row is removed.
     *
     * @generated from enum value: STAGE_DELETE = 4;
     */
    DELETE = 4,
    /**
     * Run an operator verb (an imperative operation) against a resource.
     *
     * @generated from enum value: STAGE_OPERATE = 5;
     */
    OPERATE = 5,
    /**
     * Run a reactor's side effect for a lifecycle transition of a watched resource.
     *
     * @generated from enum value: STAGE_REACT = 6;
     */
    REACT = 6
}
/**
 * Describes the enum converge.worker.v1.Stage.
 */
export declare const StageSchema: GenEnum<Stage>;
/**
 * Transition is the closed set of lifecycle edges a reactor binding can subscribe to.
 *
 * @generated from enum converge.worker.v1.Transition
 */
export declare enum Transition {
    /**
     * Never sent for a reactor task.
     *
     * @generated from enum value: TRANSITION_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * The resource was created.
     *
     * @generated from enum value: TRANSITION_CREATED = 1;
     */
    CREATED = 1,
    /**
     * The resource reached synced_gen >= generation.
     *
     * @generated from enum value: TRANSITION_SYNCED = 2;
     */
    SYNCED = 2,
    /**
     * The resource became synced but unhealthy.
     *
     * @generated from enum value: TRANSITION_DEGRADED = 3;
     */
    DEGRADED = 3,
    /**
     * The resource's reconcile failed for its live spec.
     *
     * @generated from enum value: TRANSITION_FAILED = 4;
     */
    FAILED = 4,
    /**
     * The resource was deleted.
     *
     * @generated from enum value: TRANSITION_DELETED = 5;
     */
    DELETED = 5
}
/**
 * Describes the enum converge.worker.v1.Transition.
 */
export declare const TransitionSchema: GenEnum<Transition>;
/**
 * WorkerService is served by every broker. A worker dials in, subscribes to the kinds it
 * serves, and receives tasks on one bidirectional stream.
 *
 * @generated from service converge.worker.v1.WorkerService
 */
export declare const WorkerService: GenService<{
    /**
     * WorkStream carries the whole life of a worker session: Subscribe first, then tasks from
     * the broker and completions, readiness flips and heartbeats from the worker.
     *
     * @generated from rpc converge.worker.v1.WorkerService.WorkStream
     */
    workStream: {
        methodKind: "bidi_streaming";
        input: typeof WorkStreamClientMsgSchema;
        output: typeof WorkStreamServerMsgSchema;
    };
    /**
     * GetProviderConfig returns the default provider config (spec and bundle) for each
     * requested (kind, kind_version) pair. Workers call it at start-up and after a reconnect.
     *
     * @generated from rpc converge.worker.v1.WorkerService.GetProviderConfig
     */
    getProviderConfig: {
        methodKind: "unary";
        input: typeof GetProviderConfigRequestSchema;
        output: typeof GetProviderConfigResponseSchema;
    };
    /**
     * ListDescendants pages through the live subtree of a composite whose ROLLUP task the
     * caller holds (named by its lease), so a rollup handler reads descendants only if it asks.
     *
     * @generated from rpc converge.worker.v1.WorkerService.ListDescendants
     */
    listDescendants: {
        methodKind: "unary";
        input: typeof ListDescendantsRequestSchema;
        output: typeof ListDescendantsResponseSchema;
    };
}>;
