package converge

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
)

type noteSpec struct {
	Text   string `json:"text" jsonschema:"maxLength=200,description=What the note says."`
	Copies int    `json:"copies,omitempty" jsonschema:"minimum=1,default=1"`
	Mode   string `json:"mode,omitempty" jsonschema:"enum=append,enum=replace"`
}

type noteStatus struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

type noteConfig struct {
	Directory string `json:"directory"`
	Token     string `json:"token,omitempty" jsonschema_extras:"writeOnly=true"`
}

type team struct {
	Name string `json:"name"`
}

type bom struct {
	Teams []team `json:"teams"`
}

func decode(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, raw)
	}
	return m
}

func TestSchemaOfAStructIsStrictWithItsConstraints(t *testing.T) {
	s := decode(t, SchemaOf[noteSpec]())
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" || s["type"] != "object" {
		t.Fatalf("not a 2020-12 object schema: %v", s)
	}
	if _, ok := s["$id"]; ok {
		t.Fatalf("a manifest schema carries no $id: %v", s)
	}
	if s["additionalProperties"] != false {
		t.Fatalf("additionalProperties = %v, want false", s["additionalProperties"])
	}
	if !reflect.DeepEqual(s["required"], []any{"text"}) {
		t.Fatalf("required = %v, want [text] (omitempty fields are optional)", s["required"])
	}
	props := s["properties"].(map[string]any)
	want := map[string]any{"type": "string", "maxLength": 200.0, "description": "What the note says."}
	if !reflect.DeepEqual(props["text"], want) {
		t.Fatalf("text = %v, want %v", props["text"], want)
	}
	copies := props["copies"].(map[string]any)
	if copies["type"] != "integer" || copies["minimum"] != 1.0 || copies["default"] != 1.0 {
		t.Fatalf("copies = %v", copies)
	}
	if !reflect.DeepEqual(props["mode"].(map[string]any)["enum"], []any{"append", "replace"}) {
		t.Fatalf("mode = %v", props["mode"])
	}
}

func TestSchemaOfNestedTypesPointersAndTheEmptyStruct(t *testing.T) {
	s := decode(t, SchemaOf[bom]())
	items := s["properties"].(map[string]any)["teams"].(map[string]any)["items"].(map[string]any)
	if items["$ref"] != "#/$defs/team" {
		t.Fatalf("items = %v, want a $ref into $defs", items)
	}
	if _, ok := s["$defs"].(map[string]any)["team"]; !ok {
		t.Fatalf("$defs = %v", s["$defs"])
	}
	if string(SchemaOf[*noteStatus]()) != string(SchemaOf[noteStatus]()) {
		t.Fatal("a pointer type has its element's schema")
	}
	if SchemaOf[struct{}]() != nil {
		t.Fatal("struct{} opts the axis out (nil)")
	}
	secret := decode(t, SchemaOf[noteConfig]())["properties"].(map[string]any)["token"].(map[string]any)
	if secret["writeOnly"] != true {
		t.Fatalf("token = %v, want writeOnly", secret)
	}
}

func TestManifestOfIsTheWholeDocument(t *testing.T) {
	m := ManifestOf[noteSpec, noteStatus](KindVersion{Kind: "note", Version: 2}, WorkReaction(), TeardownReaction())
	m.Description = "A note on disk."
	m.ConfigSchema = SchemaOf[noteConfig]()
	m.FinalizerName = "example.dev/note"
	m.TaskDeadlineSecs = 30
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	doc := decode(t, raw)
	var keys []string
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"config_schema", "description", "finalizer_name", "kind", "kind_version", "provider",
		"reactions", "spec_schema", "status_schema", "task_deadline_secs"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys = %v, want %v (only what was set)", keys, want)
	}
	if doc["kind"] != "note" || doc["kind_version"] != 2.0 || doc["provider"] != "sdk" {
		t.Fatalf("doc = %v", doc)
	}
	reactions := doc["reactions"].([]any)
	wantR := []any{
		map[string]any{"name": "work", "trigger": "specChange", "emits": []any{"status", "conditions"}},
		map[string]any{"name": "teardown", "trigger": "deleteRequested", "emits": []any{"finalizer"}},
	}
	if !reflect.DeepEqual(reactions, wantR) {
		t.Fatalf("reactions = %v", reactions)
	}
	if !reflect.DeepEqual(doc["spec_schema"], decode(t, SchemaOf[noteSpec]())) {
		t.Fatal("spec_schema is not SchemaOf the spec type")
	}
}

func TestReactionHelpers(t *testing.T) {
	if got := ComposeReaction().Emits; !reflect.DeepEqual(got, []string{"children", "edges", "status", "conditions"}) {
		t.Fatalf("compose emits %v", got)
	}
	if r := RollupReaction("full"); r.Trigger != TriggerChildrenSettled || r.Descendants != "full" {
		t.Fatalf("rollup = %+v", r)
	}
	op := OperationReaction("backup", SchemaOf[struct {
		SnapshotID string `json:"snapshot_id"`
	}]())
	if op.Verb != "backup" || op.Trigger != TriggerOperation ||
		!reflect.DeepEqual(decode(t, op.OutputSchema)["required"], []any{"snapshot_id"}) {
		t.Fatalf("operation = %+v", op)
	}
	if r := ReactorReaction(); r.Trigger != TriggerReactor || !reflect.DeepEqual(r.Emits, []string{"sideEffect"}) {
		t.Fatalf("reactor = %+v", r)
	}
}
