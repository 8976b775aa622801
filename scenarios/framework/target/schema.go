package target

import (
	"encoding/json"
	"reflect"
	"strings"
)

// SchemaFile is where the workspace keeps Schema's output for editors, relative to its root:
// a description's first line `# yaml-language-server: $schema=../target.schema.json` points at it.
const SchemaFile = "scenarios/targets/target.schema.json"

// Schema is the description's JSON schema (draft 2020-12), made from the same types Load checks
// against, indented and ending in a newline.
func Schema() []byte {
	s := schemaOf(reflect.TypeFor[Target]())
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["title"] = "gauntlet target description"
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(err) // maps of strings, lists and booleans always marshal
	}
	return append(out, '\n')
}

func schemaOf(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		props := map[string]any{}
		var required []string
		for _, f := range described(t) {
			name, optional := tagOf(f)
			p := schemaOf(f.Type)
			p["description"] = f.Tag.Get("doc")
			if enum := f.Tag.Get("enum"); enum != "" {
				items(p)["enum"] = strings.Split(enum, ",")
			}
			if pattern := f.Tag.Get("pattern"); pattern != "" {
				items(p)["pattern"] = pattern
			}
			props[name] = p
			if !optional {
				required = append(required, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if required != nil {
			s["required"] = required
		}
		return s
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case reflect.String:
		return map[string]any{"type": "string"}
	}
	return map[string]any{} // any: chart values
}

// items is where a field's enum and pattern go: the field itself, or its items for a list.
func items(p map[string]any) map[string]any {
	if it, ok := p["items"].(map[string]any); ok {
		return it
	}
	return p
}
