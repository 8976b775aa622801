package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reachTitle is the title of any operator's admission-dry-run before it knows the namespace.
const reachTitle = "server-side dry-runs: the API server's calls to the webhooks do not fail"

// The objects a probe creates when a rule matches every resource: their emptiest instances
// are valid, so the object passes validation and reaches the validating webhooks too.
var (
	configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	namespaceKind = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
)

// probeTarget is the kind of object a dry-run create sends through one webhook.
type probeTarget struct {
	gvk        schema.GroupVersionKind
	namespaced bool
}

// checkWebhooksReached is any operator's admission-dry-run. It cannot know a valid or an
// invalid object of an arbitrary operator, so it asks one question per webhook: does the API
// server reach it? It dry-run creates an object of a resource the webhook's rules match on
// CREATE (with its objectSelector's matchLabels) in the test namespace. A "failed calling
// webhook" naming one of the examined webhooks fails the check, classified like a release's
// dry-run; the webhook's own denial, or the object admitted, shows the call was answered. Any
// other outcome (another webhook denied first, the object invalid before validation, no
// CREATE rule) tells nothing and is said in the details; when no webhook could be probed the
// check has nothing to examine.
func checkWebhooksReached(ctx context.Context, s *session) outcome {
	tns := s.testNamespace()
	title := fmt.Sprintf("server-side dry-runs in namespace %s: the API server's calls to the webhooks do not fail", tns)
	hooks := s.webhooks()
	if len(hooks) == 0 {
		return skip(title, "no webhook configuration to examine")
	}
	var details []string
	var failed *cause
	reached := 0
	for _, w := range hooks {
		target, why := s.probeFor(w)
		if why != "" {
			details = append(details, fmt.Sprintf("webhook %s: not probed: %s", w.name, why))
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(target.gvk)
		obj.SetGenerateName("webhook-doctor-")
		what := target.gvk.Kind
		if target.namespaced {
			obj.SetNamespace(tns)
			what += " in namespace " + tns
		}
		if w.objectSelector != nil && len(w.objectSelector.MatchLabels) > 0 {
			obj.SetLabels(w.objectSelector.MatchLabels)
		}
		err := s.client.Create(ctx, obj, client.DryRunAll)
		verdict, answered, failedCall := s.judgeReach(w, err)
		details = append(details, fmt.Sprintf("webhook %s: dry-run create of a %s: %s", w.name, what, verdict))
		if answered {
			reached++
		}
		if failedCall && failed == nil {
			c := s.callFailure("the dry-run create of a "+what, err)
			failed = &c
		}
	}
	if failed != nil {
		return failure(title, *failed, details...)
	}
	if reached == 0 {
		return inapplicable(title, "no dry-run could show whether the API server reaches a webhook (see the details)")
	}
	return pass(title, details...)
}

// judgeReach says what a dry-run create's outcome shows about webhook w: answered when the API
// server's call to w was answered, failedCall when its call to one of the examined webhooks
// failed.
func (s *session) judgeReach(w webhookView, err error) (verdict string, answered, failedCall bool) {
	if err == nil {
		switch {
		case w.failurePolicy == admissionregistrationv1.Ignore:
			return "admitted, which does not show the call was answered: with failurePolicy Ignore a failed call admits it too (service-endpoints and serving-certificate judge that path)", false, false
		case w.matchConditions > 0:
			return fmt.Sprintf("admitted, which does not show the webhook was called: its %d matchConditions are not evaluated by the doctor", w.matchConditions), false, false
		}
		return "admitted", true, false
	}
	text := err.Error()
	if m := deniedBy.FindStringSubmatch(text); m != nil {
		if m[1] == w.name {
			return "answered: denied: " + shorten(text, 300), true, false
		}
		return fmt.Sprintf("not conclusive: webhook %q denied it first: %s", m[1], shorten(text, 300)), false, false
	}
	if m := failedCalling.FindStringSubmatch(text); m != nil {
		if s.isExaminedWebhook(m[1]) {
			return "failed: " + shorten(text, 400), false, true
		}
		return fmt.Sprintf("not conclusive: the call to another operator's webhook %q failed first: %s", m[1], shorten(text, 300)), false, false
	}
	return "not conclusive: " + shorten(text, 300), false, false
}

// probeFor picks the kind of object to send through w: for a rule that matches every resource
// of the core group, a ConfigMap (a Namespace when the rule is for cluster-scoped objects);
// else the first resource of its CREATE rules the API server knows, namespaced ones first
// (the test namespace's labels then count, as the namespace-selector check assumes). why says
// why there is none.
func (s *session) probeFor(w webhookView) (target probeTarget, why string) {
	var found []probeTarget
	creates := false
	for _, r := range w.rules {
		if !slices.Contains(r.Operations, admissionregistrationv1.Create) && !slices.Contains(r.Operations, admissionregistrationv1.OperationAll) {
			continue
		}
		creates = true
		scope := admissionregistrationv1.AllScopes
		if r.Scope != nil {
			scope = *r.Scope
		}
		for _, res := range r.Resources {
			if strings.Contains(res, "/") && res != "*/*" {
				continue // a subresource: not what a create sends
			}
			for _, g := range r.APIGroups {
				for _, v := range r.APIVersions {
					if t, ok := s.resolveProbe(g, v, res, scope); ok {
						found = append(found, t)
					}
				}
			}
		}
	}
	if !creates {
		return probeTarget{}, "none of its rules matches CREATE, the operation a dry-run create sends"
	}
	if len(found) == 0 {
		return probeTarget{}, "none of its CREATE rules names a resource the API server knows (wildcards other than the core group's are not expanded)"
	}
	slices.SortStableFunc(found, func(a, b probeTarget) int {
		switch {
		case a.namespaced == b.namespaced:
			return 0
		case a.namespaced:
			return -1
		}
		return 1
	})
	return found[0], ""
}

// resolveProbe maps one group, version and resource of a rule (each may be "*") to a kind of
// object, if it is one the API server knows and the rule's scope allows.
func (s *session) resolveProbe(group, version, resource string, scope admissionregistrationv1.ScopeType) (probeTarget, bool) {
	wild := func(v string) string {
		if v == "*" {
			return ""
		}
		return v
	}
	if resource == "*" || resource == "*/*" {
		if (group != "" && group != "*") || (version != "v1" && version != "*") {
			return probeTarget{}, false
		}
		if scope == admissionregistrationv1.ClusterScope {
			return probeTarget{gvk: namespaceKind}, true
		}
		return probeTarget{gvk: configMapKind, namespaced: true}, true
	}
	mapper := s.client.RESTMapper()
	gvk, err := mapper.KindFor(schema.GroupVersionResource{Group: wild(group), Version: wild(version), Resource: resource})
	if err != nil {
		return probeTarget{}, false
	}
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return probeTarget{}, false
	}
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	if (scope == admissionregistrationv1.ClusterScope && namespaced) || (scope == admissionregistrationv1.NamespacedScope && !namespaced) {
		return probeTarget{}, false
	}
	return probeTarget{gvk: gvk, namespaced: namespaced}, true
}
