package converge

import (
	"bytes"
	"encoding/json"
	"testing"
)

// canon re-encodes JSON so comparisons ignore key order and spacing.
func canon(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON %q: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestEffectiveConfigDeepMergesOverrideWinsPerKey(t *testing.T) {
	cases := []struct{ def, over, want string }{
		{`{"a":1,"nested":{"x":1,"y":{"deep":true}},"list":[1,2]}`,
			`{"b":2,"nested":{"x":9,"y":{"more":1}},"list":[3]}`,
			`{"a":1,"b":2,"nested":{"x":9,"y":{"deep":true,"more":1}},"list":[3]}`},
		{`{"a":1}`, ``, `{"a":1}`},
		{``, `{"a":1}`, `{"a":1}`},
		{``, ``, `null`},
		{`{"a":1}`, `5`, `5`},
		{`{"a":{"b":1}}`, `{"a":null}`, `{"a":null}`},
		{`"s"`, `{"a":1}`, `{"a":1}`},
		{`{"big":12345678901234567890}`, `{"x":1}`, `{"big":12345678901234567890,"x":1}`},
	}
	for _, c := range cases {
		got, err := EffectiveConfig(json.RawMessage(c.def), json.RawMessage(c.over))
		if err != nil {
			t.Fatalf("EffectiveConfig(%s, %s): %v", c.def, c.over, err)
		}
		if c.want == `{"big":12345678901234567890,"x":1}` {
			// float64 canonicalisation would round it: compare the bytes.
			if !bytes.Equal(got, []byte(c.want)) {
				t.Errorf("large integers must survive a merge: got %s", got)
			}
			continue
		}
		if canon(t, string(got)) != canon(t, c.want) {
			t.Errorf("EffectiveConfig(%s, %s) = %s, want %s", c.def, c.over, got, c.want)
		}
	}
}

func TestEffectiveConfigRejectsInvalidJSON(t *testing.T) {
	if _, err := EffectiveConfig(json.RawMessage(`{"a":`), json.RawMessage(`{}`)); err == nil {
		t.Fatal("invalid default accepted")
	}
	if _, err := EffectiveConfig(nil, json.RawMessage(`nope`)); err == nil {
		t.Fatal("invalid override accepted")
	}
}

func TestMergeValuesDoesNotModifyItsInputs(t *testing.T) {
	def := map[string]any{"a": map[string]any{"x": 1}}
	over := map[string]any{"a": map[string]any{"y": 2}}
	_ = MergeValues(def, over)
	if len(def["a"].(map[string]any)) != 1 || len(over["a"].(map[string]any)) != 1 {
		t.Fatalf("inputs modified: %v %v", def, over)
	}
}

func TestEffectiveBundleOverrideWinsWhenPresent(t *testing.T) {
	if string(EffectiveBundle([]byte("def"), nil)) != "def" ||
		string(EffectiveBundle([]byte("def"), []byte("over"))) != "over" ||
		len(EffectiveBundle(nil, nil)) != 0 {
		t.Fatal("EffectiveBundle picks the wrong side")
	}
	req := &ReactionRequest{Config: ProviderConfig{Spec: json.RawMessage(`{"a":1,"b":1}`), Bundle: []byte("d")},
		ConfigOverride: json.RawMessage(`{"b":2}`), BundleOverride: []byte("ov")}
	got, err := req.EffectiveConfig()
	if err != nil || canon(t, string(got)) != `{"a":1,"b":2}` || string(req.EffectiveBundle()) != "ov" {
		t.Fatalf("request helpers: %s %v %q", got, err, req.EffectiveBundle())
	}
}
