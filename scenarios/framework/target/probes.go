package target

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
)

// Object reads the one object of the manifest rel names (relative to the description).
func (t *Target) Object(rel string) (*unstructured.Unstructured, error) {
	objs, err := t.Objects(rel)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%s holds %d objects; a probe is one object", filepath.Join(t.dir, rel), len(objs))
	}
	return objs[0], nil
}

// Objects reads the objects of the manifest rel names (relative to the description), in order.
func (t *Target) Objects(rel string) ([]*unstructured.Unstructured, error) {
	path := filepath.Join(t.dir, rel)
	data, err := os.ReadFile(path) //nolint:gosec // G304: a manifest the target description names
	if err != nil {
		return nil, fmt.Errorf("reading a manifest of target %s: %w", t.Name, err)
	}
	objs, err := chart.DecodeManifest(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, u := range objs {
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: object %d has no apiVersion and kind", path, i+1)
		}
	}
	return objs, nil
}

// PatchOp is one operation of the JSON patch a probe expects; Value nil matches any value.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// ExpectedPatch is the probe's patch as operations.
func (p Probe) ExpectedPatch() ([]PatchOp, error) {
	var ops []PatchOp
	if err := json.Unmarshal([]byte(p.Patch), &ops); err != nil {
		return nil, fmt.Errorf("probe of webhook %s: patch: %w", p.Webhook, err)
	}
	return ops, nil
}

// PatchSeen says how got (the object the API server admitted for a probe) fails to show the
// expected operations, or nil when it shows every one: an add or replace left its path with
// the value (any, when the operation gives none), a remove took its path away.
func PatchSeen(ops []PatchOp, got *unstructured.Unstructured) error {
	var missed []error
	for _, op := range ops {
		after, inGot := pointer(got.Object, op.Path)
		switch op.Op {
		case "add", "replace":
			switch {
			case !inGot:
				missed = append(missed, fmt.Errorf("%s %s: the admitted object has no %s", op.Op, op.Path, op.Path))
			case op.Value != nil && !reflect.DeepEqual(normalise(op.Value), normalise(after)):
				missed = append(missed, fmt.Errorf("%s %s: expected %s, saw %s", op.Op, op.Path, jsonOf(op.Value), jsonOf(after)))
			}
		case "remove":
			if inGot {
				missed = append(missed, fmt.Errorf("remove %s: the admitted object still has %s", op.Path, jsonOf(after)))
			}
		default:
			missed = append(missed, fmt.Errorf("operation %q at %s: a probe expects add, replace or remove", op.Op, op.Path))
		}
	}
	return errors.Join(missed...)
}

// pointer resolves a JSON pointer (RFC 6901) in v.
func pointer(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	if !strings.HasPrefix(path, "/") {
		return nil, false
	}
	for _, token := range strings.Split(path[1:], "/") {
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[token]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(token)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// normalise makes numbers compare alike, whether they came from JSON or from the API server.
func normalise(v any) any {
	var out any
	if err := json.Unmarshal([]byte(jsonOf(v)), &out); err != nil {
		return v
	}
	return out
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
