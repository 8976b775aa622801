package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// judge is who answers a refused probe: the operator's validating webhook, or the API server
// itself checking the CRD — its OpenAPI schema (enum, minimum, required, pattern) or its CEL
// rules — which it does before it calls any webhook. Their denials read differently (the
// webhook's names it: `admission webhook "…" denied the request: …`), so a probe tells
// which one answered.
type judge int

const (
	byWebhook judge = iota
	byOpenAPI
	byCEL
)

// boundary is one admission rule probed on both sides through the API server: the values it
// must refuse, each denied word for word, and the closest values it must admit (every value of
// an enum, the limit itself, an unchanged immutable field), each admitted. The coverage test
// (boundaries_test.go) checks that the rows cover every rule of the operator's validation
// package and of the CRDs' schema and CEL.
type boundary struct {
	scenario string // the catalog ID whose feature probes the row
	id       string // names the row's objects: <id>-r<n> (refused), <id>-a<n> (admitted)
	rule     string // the rule, as failure messages name it
	kind     kind
	judge    judge
	// base is, for a rule on updates, the spec each probe's object is created with before the
	// probe's spec is applied as a JSON merge patch; nil for a rule on creates.
	base     map[string]any
	refused  []probe
	admitted []probe
}

// probe is one request of a boundary: a create with spec, or an update patching spec.
type probe struct {
	name   string         // the object's name; "" for the row's <id>-r<n> / <id>-a<n>
	spec   map[string]any // create: the spec; update: the merge patch of the spec
	phase  string         // update: status.phase set on the base object before the patch
	causes []string       // refused: the denial's causes ("<field path>: <problem>"), word for word
}

func (p probe) objectName(b boundary, side string, i int) string {
	if p.name != "" {
		return p.name
	}
	return fmt.Sprintf("%s-%s%d", b.id, side, i)
}

// boundariesOf are the rows the feature of scenario runs.
func boundariesOf(scenario string) []boundary {
	var out []boundary
	for _, b := range boundaries() {
		if b.scenario == scenario {
			out = append(out, b)
		}
	}
	return out
}

// celBoundaries are the rows whose rule is one of the CRDs' CEL rules (A11 runs them with the
// webhooks bypassed).
func celBoundaries() []boundary {
	var out []boundary
	for _, b := range boundaries() {
		if b.judge == byCEL {
			out = append(out, b)
		}
	}
	return out
}

// boundariesStep is the step that probes the rows of scenario in the feature's namespace *ns.
const boundariesStep = "every rule on both sides: each refused value denied word for word, by the webhook or by the CRD's schema or CEL; each closest admitted value admitted"

func assessBoundaries(ns *string, scenario string) features.Func {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		dyn := suite.ClusterFrom(ctx, t).Dynamic()
		for _, b := range boundariesOf(scenario) {
			expectBoundary(ctx, t, dyn, *ns, b)
		}
		return ctx
	}
}

// expectBoundary sends every probe of b in namespace ns: each refused one must be denied with
// its causes by b's judge, each admitted one admitted (a create also stored as written).
func expectBoundary(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string, b boundary) {
	t.Helper()
	for i, p := range b.refused {
		name := p.objectName(b, "r", i)
		doing, _, err := b.send(ctx, t, dyn, ns, name, p)
		expectDenied(t, fmt.Sprintf("rule %q, refused side: %s", b.rule, doing), err, b.denial(ns, name, p.causes))
	}
	for i, p := range b.admitted {
		name := p.objectName(b, "a", i)
		doing, got, err := b.send(ctx, t, dyn, ns, name, p)
		if expectAdmitted(t, fmt.Sprintf("rule %q, admitted side: %s", b.rule, doing), err) && b.base == nil {
			expectStored(t, "spec of "+b.kind.name+" "+ref(ns, name), nestedMap(got, "spec"), p.spec)
		}
	}
}

// send makes p's request and says what it did: a create of spec, or, for an update rule, the
// base object created (and its status.phase set) and then patched. It returns the API
// server's answer.
func (b boundary) send(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns, name string, p probe) (string, *unstructured.Unstructured, error) {
	t.Helper()
	body, _ := json.Marshal(p.spec)
	what := b.kind.name + " " + ref(ns, name)
	if b.base == nil {
		got, err := b.kind.tryCreate(ctx, dyn, b.kind.object(ns, name, p.spec))
		return fmt.Sprintf("creating %s with spec %s", what, body), got, err
	}
	b.kind.mustCreate(ctx, t, dyn, b.kind.object(ns, name, b.base))
	doing := fmt.Sprintf("patching the spec of %s with %s", what, body)
	if p.phase != "" {
		b.kind.patchStatus(ctx, t, dyn, ns, name, map[string]any{"phase": p.phase})
		doing += " while " + p.phase
	}
	got, err := b.kind.tryPatch(ctx, dyn, ns, name, map[string]any{"spec": p.spec})
	return doing, got, err
}

// denial is the message of b's judge denying namespace/name with causes.
func (b boundary) denial(namespace, name string, causes []string) string {
	if b.judge == byWebhook {
		return b.kind.denial(namespace, name, causes...)
	}
	if b.judge == byOpenAPI && b.kind.celRules && slices.ContainsFunc(causes, blocksCEL) {
		causes = append(slices.Clip(causes), celSkipped)
	}
	return b.kind.schemaDenial(name, causes...)
}

// blocksCEL says whether the API server, refusing an object for cause, skips the CRD's CEL
// rules: a missing required field or a value outside an enum does, a minimum or pattern not.
func blocksCEL(cause string) bool {
	return strings.Contains(cause, ": Required value") || strings.Contains(cause, ": Unsupported value: ")
}

// maskedByDefaulter are the schema rules of DynamoGraphDeployment ("<path> <problem>", as the
// coverage test names them) the API server never gets to apply: the mutating webhook decodes
// the graph into the operator's Go types, as strictly as the hostile suite expects, and so
// refuses a malformed quantity itself (`quantities must match the regular expression …`)
// before the API server's schema validation runs.
var maskedByDefaulter = []string{
	"spec.services.*.sharedMemory.size Invalid value",
	"spec.pvcs[*].size Invalid value",
}

// celSkipped is the cause the API server adds when blocksCEL.
const celSkipped = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

// boundaries is every admission rule with its two sides.
func boundaries() []boundary {
	return concat(componentBoundaries(), componentDeploymentBoundaries(), graphBoundaries(), modelBoundaries(), requestBoundaries())
}

func concat(lists ...[]boundary) []boundary {
	var out []boundary
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// backendFrameworkFixed is the CRDs' CEL rule a DynamoComponentDeployment (A4) and a
// DynamoGraphDeployment (A3) share: backendFramework vllm cannot change or be removed; sent
// unchanged, it is admitted.
func backendFrameworkFixed(scenario string, k kind, base map[string]any, other string) boundary {
	cause := []string{"spec: Invalid value: backendFramework is immutable"}
	return boundary{scenario: scenario, id: "backend-framework", rule: "backendFramework immutable (CEL)", kind: k, judge: byCEL, base: base,
		refused:  []probe{{spec: map[string]any{"backendFramework": other}, causes: cause}, {spec: map[string]any{"backendFramework": nil}, causes: cause}},
		admitted: []probe{{spec: map[string]any{"backendFramework": "vllm"}}}}
}

// quantityPattern is the OpenAPI pattern a resource.Quantity field of the CRDs must match.
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
