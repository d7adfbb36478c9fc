package converge

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"converge.dev/sdk-go/gen/workerv1"
)

// Stage is the pipeline step a task runs (the wire enum of converge.worker.v1).
type Stage = workerv1.Stage

// The stages a task can carry.
const (
	StageUnspecified = workerv1.Stage_STAGE_UNSPECIFIED
	StageCompose     = workerv1.Stage_STAGE_COMPOSE
	StageWork        = workerv1.Stage_STAGE_WORK
	StageRollup      = workerv1.Stage_STAGE_ROLLUP
	StageDelete      = workerv1.Stage_STAGE_DELETE
	StageOperate     = workerv1.Stage_STAGE_OPERATE
	StageReact       = workerv1.Stage_STAGE_REACT
)

// Transition is the lifecycle edge that fired a reactor task (the wire enum).
type Transition = workerv1.Transition

// The transitions a reactor can see; TransitionUnspecified means "none".
const (
	TransitionUnspecified = workerv1.Transition_TRANSITION_UNSPECIFIED
	TransitionCreated     = workerv1.Transition_TRANSITION_CREATED
	TransitionSynced      = workerv1.Transition_TRANSITION_SYNCED
	TransitionDegraded    = workerv1.Transition_TRANSITION_DEGRADED
	TransitionFailed      = workerv1.Transition_TRANSITION_FAILED
	TransitionDeleted     = workerv1.Transition_TRANSITION_DELETED
)

// The wire spellings of StageTask.trigger: what fired a task.
const (
	// TriggerSpecChange: the generation bumped (a spec edit or the first apply).
	TriggerSpecChange = "specChange"
	// TriggerChildrenSettled: a composite's whole live subtree settled.
	TriggerChildrenSettled = "childrenSettled"
	// TriggerDeleteRequested: a finalizer-bearing resource is being torn down.
	TriggerDeleteRequested = "deleteRequested"
	// TriggerOperation: an operation was requested.
	TriggerOperation = "operation"
	// TriggerReactor: a reactor binding matched a lifecycle transition.
	TriggerReactor = "reactor"
	// TriggerResync: a drift tick re-observes the resource without a generation bump.
	TriggerResync = "resync"
)

// Condition types with a meaning to the core.
const (
	// ConditionReady feeds a resource's health.
	ConditionReady = "Ready"
	// ConditionSynced is derived by the core from synced_gen vs generation.
	ConditionSynced = "Synced"
)

// KindVersion names one (kind, kind_version) pair a provider serves.
type KindVersion struct {
	Kind    string
	Version int32
}

// String renders the pair as kind@vN.
func (kv KindVersion) String() string { return fmt.Sprintf("%s@v%d", kv.Kind, kv.Version) }

// UUID is a resource or operation id as 16 raw bytes; the zero value means "none".
type UUID [16]byte

// IsZero reports whether the id is absent.
func (u UUID) IsZero() bool { return u == UUID{} }

// String renders the id in the canonical 8-4-4-4-12 form.
func (u UUID) String() string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ProviderConfig is a kind's default provider config as pushed by the broker. Both parts
// empty means the kind has no default config (or it was deleted).
type ProviderConfig struct {
	// Spec is the config spec JSON; nil when absent.
	Spec json.RawMessage
	// Bundle is the config's opaque bundle (e.g. a WASM component); empty when absent.
	Bundle []byte
}

// IsEmpty reports whether neither a spec nor a bundle is present.
func (c ProviderConfig) IsEmpty() bool { return len(c.Spec) == 0 && len(c.Bundle) == 0 }

// Resource is a read-only view of one resource row.
type Resource struct {
	ID          UUID
	Kind        string
	KindVersion int32
	// Name is unique within its kind.
	Name string
	// OwnerID is the composing parent (zero for a root).
	OwnerID UUID
	// RootID is the composition root (zero for a root).
	RootID UUID
	// Spec is the spec JSON ({} when the broker sent none).
	Spec json.RawMessage
	// Status is the last applied status JSON; nil when none.
	Status     json.RawMessage
	Generation int64
	SyncedGen  int64
	// IsReady: synced, healthy and not being deleted.
	IsReady bool
	// Phase is the derived phase (Ready, Reconciling, Degraded, Failed, Deleting, ...).
	Phase      string
	Labels     map[string]string
	Finalizers []string
}

// Operation is an imperative verb requested against a resource (StageOperate).
type Operation struct {
	ResourceID UUID
	// Verb is as declared by the kind's manifest.
	Verb string
	// Input is the verb's input JSON; nil when none.
	Input       json.RawMessage
	Attempts    int32
	RequestedBy string
}

// ReactionRequest is everything a handler gets for one task. Cancellation (deadline,
// CancelTask, worker shutdown) arrives through the context passed to Work.
type ReactionRequest struct {
	// Reaction is the manifest reaction being run; a provider handles all its kind's
	// reactions and switches on this (or on Stage).
	Reaction string
	Stage    Stage
	// Trigger is what fired the task (one of the Trigger constants).
	Trigger     string
	Kind        string
	KindVersion int32
	// Resource is the resource (the root for COMPOSE and ROLLUP).
	Resource Resource
	// Status is the status accumulated so far in this reconcile (WORK, ROLLUP); nil if none.
	Status json.RawMessage
	// Generation is the spec generation this task reconciles.
	Generation int64
	// Attempt is 1 for the first attempt at this generation, counting up with each retry.
	Attempt int32
	// Deadline is when the broker stops waiting for the task; zero means none.
	Deadline time.Time
	// Config is the kind's cached default provider config.
	Config ProviderConfig
	// ConfigOverride is the per-resource config override JSON; nil when none.
	ConfigOverride json.RawMessage
	// BundleOverride is the per-resource bundle override; empty means the default bundle.
	BundleOverride []byte
	// Observed lists the children the root currently owns (COMPOSE).
	Observed []Resource
	// Descendants is the root's live subtree (ROLLUP), only when the kind's rollup reaction
	// declares "descendants": "full" (then DescendantsIncluded); otherwise empty: read
	// Summary, or page with DescendantPages / ReadDescendants.
	Descendants []Resource
	// DescendantsIncluded reports whether Descendants holds the whole live subtree (the
	// full form).
	DescendantsIncluded bool
	// Summary is the subtree's counts and the refs that need attention (ROLLUP, either
	// form); nil for other stages.
	Summary *RollupSummary
	// Subtree is where DescendantPages reads from: the broker the task came from for a
	// ROLLUP task, nothing otherwise; a test sets FixedSubtree.
	Subtree Subtree
	// Operation is the operation to run (OPERATE); nil otherwise.
	Operation *Operation
	// Transition is the lifecycle transition that fired (REACT); unspecified otherwise.
	Transition Transition
	// DedupToken is a stable key for idempotent side effects (REACT); empty otherwise.
	DedupToken string
	// dryRun marks a plan's dry run (see DryRun).
	dryRun bool
}

// DryRun reports whether this COMPOSE is a plan's dry run (POST /api/v1/resources:plan):
// compose as usual and return the outcome, which is compared with the stored children and
// never stored. A composer is meant to be pure; one that is not (it calls out, it counts)
// must skip its side effects when this is true.
func (r *ReactionRequest) DryRun() bool { return r.dryRun }

// WithDryRun returns r marked as a dry run or not, for tests of a composer's dry-run path.
func (r ReactionRequest) WithDryRun(dryRun bool) ReactionRequest {
	r.dryRun = dryRun
	return r
}

// Spec decodes the resource's spec into v. Keys v has no field for are ignored (the rule
// every converge SDK follows), so a kind can add an optional spec field without breaking
// the workers already deployed. A spec that does not fit (a value of the wrong type) is a
// terminal error: retrying cannot fix it, a spec change can.
func (r *ReactionRequest) Spec(v any) error {
	spec := r.Resource.Spec
	if len(spec) == 0 {
		spec = json.RawMessage("{}")
	}
	if err := json.Unmarshal(spec, v); err != nil {
		return Terminal(fmt.Errorf("invalid spec: %w", err))
	}
	return nil
}

// EffectiveConfig is the default config deep-merged with the per-resource override
// (override wins per key); JSON null when neither exists. See [EffectiveConfig].
func (r *ReactionRequest) EffectiveConfig() (json.RawMessage, error) {
	return EffectiveConfig(r.Config.Spec, r.ConfigOverride)
}

// EffectiveBundle is the per-resource bundle override if non-empty, else the default bundle.
func (r *ReactionRequest) EffectiveBundle() []byte {
	return EffectiveBundle(r.Config.Bundle, r.BundleOverride)
}
