package converge

import (
	"bytes"
	"encoding/json"
	"fmt"
)

var jsonNull = json.RawMessage("null")

// EffectiveConfig deep-merges over onto def, the override winning per key, the same way in
// every SDK: objects merge recursively; any other value in the override (arrays and null
// included) replaces the default's value. With one side present (non-empty) that side is
// returned; with neither, JSON null. An error means one side is not valid JSON.
func EffectiveConfig(def, over json.RawMessage) (json.RawMessage, error) {
	switch {
	case len(def) == 0 && len(over) == 0:
		return jsonNull, nil
	case len(over) == 0:
		return validJSON(def, "default config")
	case len(def) == 0:
		return validJSON(over, "config override")
	}
	d, err := decodeJSON(def, "default config")
	if err != nil {
		return nil, err
	}
	o, err := decodeJSON(over, "config override")
	if err != nil {
		return nil, err
	}
	return json.Marshal(MergeValues(d, o))
}

// MergeValues is EffectiveConfig on decoded JSON values (map[string]any, []any, ...). It
// never modifies its arguments.
func MergeValues(def, over any) any {
	dm, dok := def.(map[string]any)
	om, ook := over.(map[string]any)
	if !dok || !ook {
		return over
	}
	out := make(map[string]any, len(dm)+len(om))
	for k, v := range dm {
		out[k] = v
	}
	for k, v := range om {
		if existing, ok := out[k]; ok {
			out[k] = MergeValues(existing, v)
		} else {
			out[k] = v
		}
	}
	return out
}

// EffectiveBundle is the override bundle if it is non-empty, otherwise the default bundle.
func EffectiveBundle(def, over []byte) []byte {
	if len(over) == 0 {
		return def
	}
	return over
}

func validJSON(b json.RawMessage, what string) (json.RawMessage, error) {
	if !json.Valid(b) {
		return nil, fmt.Errorf("%s is not valid JSON", what)
	}
	return b, nil
}

// decodeJSON keeps numbers as json.Number so a merge never rounds a large integer.
func decodeJSON(b json.RawMessage, what string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w", what, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s is not valid JSON: trailing data", what)
	}
	return v, nil
}
