package target

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// RegistersWebhooks says whether objs (a rendered chart) hold a webhook configuration. An
// operator whose chart holds none registers its webhooks itself once it runs (Kyverno), so the
// checks read them from the cluster (ServedAtRuntime).
func RegistersWebhooks(objs []*unstructured.Unstructured) bool {
	return slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "ValidatingWebhookConfiguration" || o.GetKind() == "MutatingWebhookConfiguration"
	})
}

// ServedAtRuntime is ServedBy for an operator that registers its webhook configurations itself:
// configurations are the ones in the cluster (Kind set), objs the rendered chart. Only the
// webhooks served by names.Deployment — those calling a Service of namespace that the chart
// renders and whose selector matches the Deployment's pods — are the target's here; skipped
// lists the others (another Deployment's, as Kyverno's cleanup controller registers its own),
// each as "<configuration>/<webhook> (Service <name>)". names.Deployment is required: without a
// rendered webhook, nothing else says which Deployment serves them.
func ServedAtRuntime(objs, configurations []*unstructured.Unstructured, namespace string, names Names) (s Served, skipped []string, err error) {
	if names.Deployment == "" {
		return s, nil, errors.New("the rendered chart registers no webhook (the operator registers its own at runtime): set names.deployment to the Deployment whose pods serve them")
	}
	var d *appsv1.Deployment
	services := map[string]*corev1.Service{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			if o.GetName() == names.Deployment {
				d = &appsv1.Deployment{}
				if err := fromUnstructured(o, d); err != nil {
					return s, nil, err
				}
			}
		case "Service":
			svc := &corev1.Service{}
			if err := fromUnstructured(o, svc); err != nil {
				return s, nil, err
			}
			services[svc.Name] = svc
		}
	}
	if d == nil {
		return s, nil, fmt.Errorf("names.deployment %s is not a Deployment the chart renders", names.Deployment)
	}
	servesD := func(ns, name string) bool {
		svc := services[name]
		return ns == namespace && svc != nil && len(svc.Spec.Selector) > 0 &&
			labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels))
	}
	var kept []*unstructured.Unstructured
	for _, c := range configurations {
		c = c.DeepCopy()
		hooks, _, err := unstructured.NestedSlice(c.Object, "webhooks")
		if err != nil {
			return s, nil, fmt.Errorf("reading %s %s: %w", c.GetKind(), c.GetName(), err)
		}
		var mine []any
		for _, h := range hooks {
			m, _ := h.(map[string]any)
			name, _, _ := unstructured.NestedString(m, "name")
			svcNS, _, _ := unstructured.NestedString(m, "clientConfig", "service", "namespace")
			svcName, _, _ := unstructured.NestedString(m, "clientConfig", "service", "name")
			switch {
			case servesD(svcNS, svcName):
				mine = append(mine, h)
			case svcNS == namespace:
				skipped = append(skipped, fmt.Sprintf("%s/%s (Service %s)", c.GetName(), name, svcName))
			}
		}
		if len(mine) > 0 {
			if err := unstructured.SetNestedSlice(c.Object, mine, "webhooks"); err != nil {
				return s, nil, err
			}
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		others := ""
		if len(skipped) > 0 {
			others = " (the namespace's other webhooks: " + strings.Join(skipped, ", ") + ")"
		}
		return s, skipped, fmt.Errorf("no webhook configuration in the cluster calls a Service in front of Deployment %s yet%s", names.Deployment, others)
	}
	s, err = ServedBy(append(slices.Clone(objs), kept...), namespace, names)
	return s, skipped, err
}
