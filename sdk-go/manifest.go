package converge

// Kind manifests built from the handler's own types: SchemaOf[T]() is the JSON Schema
// (2020-12) of a Go type, and KindManifest the whole manifest document that
// `PUT /api/v1/kinds/{kind}/manifest` (or `conctl apply -f`) takes, its spec, status and config
// schemas generated from the structs the handler decodes with (req.Spec(&spec)). One source for
// both, so the schema converge checks every spec against cannot drift from the type the worker
// reads. The fields are described in docs/manifest.md.

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"
)

// SchemaOf returns the JSON Schema (draft 2020-12) of T, for a manifest's spec_schema,
// status_schema or config_schema (github.com/invopop/jsonschema reflects it).
//
// Fields are named by their `json` tags; a field without `omitempty` (or `omitzero`) is
// required, and a struct refuses keys it has no field for (`additionalProperties: false`), so
// converge refuses a misspelt key at apply. req.Spec still ignores keys a deployed worker does
// not know. Constraints come from `jsonschema` tags (`jsonschema:"minLength=1,maxLength=200"`,
// `jsonschema:"enum=append,enum=replace"`, `jsonschema:"description=..."`); a secret config
// field says `jsonschema_extras:"writeOnly=true"`. Nested named structs land in `$defs`.
//
// An empty struct (struct{}) opts the axis out: SchemaOf returns nil, which leaves the
// manifest's field out (untyped).
func SchemaOf[T any]() json.RawMessage {
	t := reflect.TypeFor[T]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && t.NumField() == 0 {
		return nil
	}
	r := jsonschema.Reflector{
		// No $id made from the Go package path: a manifest's schema is data, not a URL.
		Anonymous: true,
		// The root type inline, not a $ref to its own $defs entry.
		ExpandedStruct: true,
	}
	b, err := json.Marshal(r.ReflectFromType(t))
	if err != nil {
		// A reflected schema is plain data; failing to marshal it is a bug, not an input error.
		panic(fmt.Sprintf("converge.SchemaOf[%s]: %v", t, err))
	}
	return b
}

// ReactionDecl is one reaction of a manifest (docs/manifest.md, "Reactions").
type ReactionDecl struct {
	Name    string   `json:"name"`
	Trigger string   `json:"trigger"`
	Emits   []string `json:"emits"`
	// Verb: only on an operation reaction, and required there.
	Verb string `json:"verb,omitempty"`
	// Finalizer: only on a deleteRequested reaction (default: the manifest's FinalizerName).
	Finalizer string `json:"finalizer,omitempty"`
	// Descendants: only on a childrenSettled reaction, "summary" (default) or "full".
	Descendants string `json:"descendants,omitempty"`
	// OutputSchema: only on an operation reaction, the JSON Schema of its output.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// WorkReaction is a kind's worker: it runs on every spec change and reports status and
// conditions.
func WorkReaction() ReactionDecl {
	return ReactionDecl{Name: "work", Trigger: TriggerSpecChange, Emits: []string{"status", "conditions"}}
}

// ComposeReaction is a composite's composer: children, edges, status and conditions.
func ComposeReaction() ReactionDecl {
	return ReactionDecl{Name: "compose", Trigger: TriggerSpecChange,
		Emits: []string{"children", "edges", "status", "conditions"}}
}

// RollupReaction is a composite's rollup, run once its subtree has settled; descendants is
// "summary", "full" or "" (the default, summary).
func RollupReaction(descendants string) ReactionDecl {
	return ReactionDecl{Name: "rollup", Trigger: TriggerChildrenSettled, Emits: []string{"status", "conditions"},
		Descendants: descendants}
}

// TeardownReaction is the teardown a deletion waits for (set the manifest's FinalizerName).
func TeardownReaction() ReactionDecl {
	return ReactionDecl{Name: "teardown", Trigger: TriggerDeleteRequested, Emits: []string{"finalizer"}}
}

// OperationReaction handles `POST .../ops {"verb": verb}`; output (SchemaOf the output
// type, or nil) checks every output.
func OperationReaction(verb string, output json.RawMessage) ReactionDecl {
	return ReactionDecl{Name: verb, Trigger: TriggerOperation, Verb: verb, Emits: []string{"operationOutput"},
		OutputSchema: output}
}

// ReactorReaction is a reactor kind's one reaction.
func ReactorReaction() ReactionDecl {
	return ReactionDecl{Name: "react", Trigger: TriggerReactor, Emits: []string{"sideEffect"}}
}

// EdgeEnd names a kind in a static edge (KindVersion 0 means 1).
type EdgeEnd struct {
	Kind        string `json:"kind"`
	KindVersion int32  `json:"kind_version,omitempty"`
}

// EdgeValue is one value flow of a static edge: the upstream's status at SourceField fills
// the dependent's spec at DependentField (JSON pointers).
type EdgeValue struct {
	DependentField string `json:"dependent_field"`
	SourceField    string `json:"source_field"`
}

// EdgeDecl declares that resources of kind From take values from the status of resources of
// kind To (docs/manifest.md, "Edges").
type EdgeDecl struct {
	From   EdgeEnd     `json:"from"`
	To     EdgeEnd     `json:"to"`
	Values []EdgeValue `json:"values"`
}

// KindManifest is a kind's manifest document, as converge takes it: marshal it with
// encoding/json and apply it. Zero-valued optional fields are left out of the JSON.
type KindManifest struct {
	Kind        string `json:"kind"`
	KindVersion int32  `json:"kind_version"`
	Description string `json:"description,omitempty"`
	// Provider: "sdk" (NewManifest's default) for a worker written with an SDK.
	Provider     string          `json:"provider,omitempty"`
	SpecSchema   json.RawMessage `json:"spec_schema,omitempty"`
	StatusSchema json.RawMessage `json:"status_schema,omitempty"`
	ConfigSchema json.RawMessage `json:"config_schema,omitempty"`
	Reactions    []ReactionDecl  `json:"reactions"`
	// FinalizerName makes deletion two-phase (needs a TeardownReaction).
	FinalizerName        string     `json:"finalizer_name,omitempty"`
	MaxInflight          int32      `json:"max_inflight,omitempty"`
	TaskDeadlineSecs     int32      `json:"task_deadline_secs,omitempty"`
	ResyncIntervalSecs   int32      `json:"resync_interval_secs,omitempty"`
	ResyncRecomposes     bool       `json:"resync_recomposes,omitempty"`
	OrphanGraceSecs      int32      `json:"orphan_grace_secs,omitempty"`
	MaxTransientAttempts int32      `json:"max_transient_attempts,omitempty"`
	Edges                []EdgeDecl `json:"edges,omitempty"`
}

// ManifestOf starts the manifest of kind kv whose spec is a Spec and whose status is a
// Status (struct{} for either leaves it untyped), served by an SDK worker, with the given
// reactions. Set the other fields on the result, then marshal it:
//
//	m := converge.ManifestOf[NoteSpec, NoteStatus](kv, converge.WorkReaction())
//	m.ConfigSchema = converge.SchemaOf[NoteConfig]()
//	m.TaskDeadlineSecs = 30
//	out, _ := json.MarshalIndent(m, "", "  ")
func ManifestOf[Spec, Status any](kv KindVersion, reactions ...ReactionDecl) *KindManifest {
	return &KindManifest{
		Kind:         kv.Kind,
		KindVersion:  kv.Version,
		Provider:     "sdk",
		SpecSchema:   SchemaOf[Spec](),
		StatusSchema: SchemaOf[Status](),
		Reactions:    reactions,
	}
}
