// Package conversion holds the conversion scenario (CATALOG.md A8) as an e2e-framework
// feature: DynamoGraphDeploymentRequests written in one version read back in the other, and
// back again, without losing a field, through the operator's conversion webhook. It carries no
// certmode label: conversion must work in every certificate mode, so every suite runs it.
package conversion

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Features are the conversion scenarios.
func Features() []e2etypes.Feature {
	return []e2etypes.Feature{roundTrip()}
}

// The two served versions of DynamoGraphDeploymentRequest; v1beta1 is stored.
var (
	v1alpha1Requests = schema.GroupVersionResource{Group: dynamo.Group, Version: "v1alpha1", Resource: "dynamographdeploymentrequests"}
	v1beta1Requests  = dynamo.GraphDeploymentRequests
)

// conversionAnnotation is where ConvertFrom keeps v1beta1 data v1alpha1 cannot express; a
// lossless round trip never shows it to users of either version.
const conversionAnnotation = "nvidia.com/dgdr-v1beta1-conversion-data"

// userImage is a profiler image a user chose.
const userImage = "registry.example.com/team/profiler:1.2.3"

// convergeTimeout bounds waits for the operator (status) and cert-manager's cainjector.
const convergeTimeout = time.Minute

// Specs written in one version and what the other version must show.
var (
	// writtenAlpha is a v1alpha1 spec using every field v1alpha1 has.
	writtenAlpha = map[string]any{
		"model":           "meta-llama/Llama-3-8B",
		"backend":         "sglang",
		"autoApply":       true,
		"profilingConfig": map[string]any{"profilerImage": userImage, "useAIConfigurator": true},
		"sla":             map[string]any{"ttft": int64(200), "itl": int64(20)},
	}
	// writtenAlphaAsBeta is writtenAlpha read as v1beta1.
	writtenAlphaAsBeta = map[string]any{
		"model":          "meta-llama/Llama-3-8B",
		"backend":        "sglang",
		"autoApply":      true,
		"image":          userImage,
		"searchStrategy": "rapid",
		"sla":            map[string]any{"ttftMilliseconds": int64(200), "itlMilliseconds": int64(20)},
	}
	// writtenBeta is a v1beta1 spec using every field v1beta1 has.
	writtenBeta = map[string]any{
		"model":          "Qwen/Qwen3-32B",
		"backend":        "vllm",
		"autoApply":      true,
		"image":          userImage,
		"searchStrategy": "thorough",
		"sla":            map[string]any{"ttftMilliseconds": int64(500), "itlMilliseconds": int64(30)},
	}
	// writtenBetaAsAlpha is writtenBeta read as v1alpha1.
	writtenBetaAsAlpha = map[string]any{
		"model":           "Qwen/Qwen3-32B",
		"backend":         "vllm",
		"autoApply":       true,
		"profilingConfig": map[string]any{"profilerImage": userImage, "useAIConfigurator": false},
		"sla":             map[string]any{"ttft": int64(500), "itl": int64(30)},
	}
)

func request(gvr schema.GroupVersionResource, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       "DynamoGraphDeploymentRequest",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       spec,
	}}
}

// roundTrip is A8: the DGDR CRD sends conversions to the release's Service with a caBundle
// that verifies the certificate it serves, whatever the certificate mode, and requests convert
// v1alpha1 ⇄ v1beta1 losslessly — spec and status, on reads, lists and writes — with admission
// seeing v1alpha1 requests in their v1beta1 form.
func roundTrip() e2etypes.Feature {
	var ns string
	return features.New("DynamoGraphDeploymentRequest converts v1alpha1 ⇄ v1beta1 losslessly through the conversion webhook").
		WithLabel(suite.LabelScenario, "A8").
		Setup(suite.NamespaceSetup(&ns, "a8")).
		Assess("the CRD converts through the release's Service, with a caBundle that verifies the served certificate", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			crd, err := c.CRDs().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, chart.ConversionCRD, metav1.GetOptions{})
			expect.NoError(t, err, "getting CustomResourceDefinition %s", chart.ConversionCRD)
			expectVersions(t, crd)
			expectConversionService(t, crd, r)
			what := fmt.Sprintf("the conversion caBundle of CustomResourceDefinition %s to verify the certificate Service %s/%s serves for %s",
				chart.ConversionCRD, r.Namespace, r.ServiceName(), r.ServiceHost())
			expect.Eventually(ctx, t, what, convergeTimeout, func(ctx context.Context) (bool, string, error) {
				return caBundleVerifiesServed(ctx, c, r)
			})
			return ctx
		})).
		Assess("a request created as v1alpha1 reads as v1beta1 with every field mapped, and back as v1alpha1 unchanged", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			const name = "written-alpha"
			created, err := dyn.Resource(v1alpha1Requests).Namespace(ns).Create(ctx, request(v1alpha1Requests, ns, name, writtenAlpha), metav1.CreateOptions{})
			expect.NoError(t, err, "creating v1alpha1 DynamoGraphDeploymentRequest %s/%s", ns, name)
			expectSpec(t, "spec returned by creating v1alpha1 DynamoGraphDeploymentRequest "+ns+"/"+name, writtenAlpha, created)

			beta := mustGet(ctx, t, dyn, v1beta1Requests, ns, name)
			expectSpec(t, "spec of "+ns+"/"+name+" read as v1beta1", writtenAlphaAsBeta, beta)
			expectSameObject(t, created, beta)
			alpha := mustGet(ctx, t, dyn, v1alpha1Requests, ns, name)
			expectSpec(t, "spec of "+ns+"/"+name+" read back as v1alpha1", writtenAlpha, alpha)
			return ctx
		}).
		Assess("a request created as v1beta1 reads as v1alpha1, and a v1alpha1 write of what was read changes nothing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			const name = "written-beta"
			created, err := dyn.Resource(v1beta1Requests).Namespace(ns).Create(ctx, request(v1beta1Requests, ns, name, writtenBeta), metav1.CreateOptions{})
			expect.NoError(t, err, "creating v1beta1 DynamoGraphDeploymentRequest %s/%s", ns, name)
			alpha := mustGet(ctx, t, dyn, v1alpha1Requests, ns, name)
			expectSpec(t, "spec of "+ns+"/"+name+" read as v1alpha1", writtenBetaAsAlpha, alpha)

			// `kubectl get -o yaml` with the old version, then `kubectl replace` of that file.
			var replaced *unstructured.Unstructured
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				current, err := dyn.Resource(v1alpha1Requests).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				replaced, err = dyn.Resource(v1alpha1Requests).Namespace(ns).Update(ctx, current, metav1.UpdateOptions{})
				return err
			})
			expect.NoError(t, err, "replacing DynamoGraphDeploymentRequest %s/%s with its own v1alpha1 form", ns, name)
			expectSpec(t, "spec returned by the v1alpha1 replace of "+ns+"/"+name, writtenBetaAsAlpha, replaced)

			beta := mustGet(ctx, t, dyn, v1beta1Requests, ns, name)
			expectSpec(t, "spec of "+ns+"/"+name+" read as v1beta1 after the v1alpha1 replace", writtenBeta, beta)
			expect.Equal(t, "metadata.generation of "+ns+"/"+name+" after replacing it with its own v1alpha1 form (a change means the spec changed)",
				created.GetGeneration(), beta.GetGeneration())
			return ctx
		}).
		Assess("status converts both ways: phase ⇄ state", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			const name = "written-alpha"
			// The operator moves every new request to Pending (in v1beta1).
			expect.Eventually(ctx, t, "v1alpha1 status.state of "+ns+"/"+name+" to show the Pending phase the operator set", convergeTimeout,
				func(ctx context.Context) (bool, string, error) {
					alpha, err := dyn.Resource(v1alpha1Requests).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return false, err.Error(), nil
					}
					state, _, _ := unstructured.NestedString(alpha.Object, "status", "state")
					return state == "Pending", fmt.Sprintf("status %v", alpha.Object["status"]), nil
				})
			_, err := dyn.Resource(v1alpha1Requests).Namespace(ns).Patch(ctx, name, types.MergePatchType,
				[]byte(`{"status":{"state":"Deploying"}}`), metav1.PatchOptions{}, "status")
			expect.NoError(t, err, "patching v1alpha1 status.state of %s/%s to Deploying", ns, name)
			beta := mustGet(ctx, t, dyn, v1beta1Requests, ns, name)
			phase, _, _ := unstructured.NestedString(beta.Object, "status", "phase")
			expect.Equal(t, "v1beta1 status.phase of "+ns+"/"+name+" after setting v1alpha1 status.state to Deploying", "Deploying", phase)
			return ctx
		}).
		Assess("listing as v1alpha1 converts every request", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			alphas, err := dyn.Resource(v1alpha1Requests).Namespace(ns).List(ctx, metav1.ListOptions{})
			expect.NoError(t, err, "listing DynamoGraphDeploymentRequests in %s as v1alpha1", ns)
			var names []string
			for _, item := range alphas.Items {
				names = append(names, item.GetAPIVersion()+" "+item.GetName())
			}
			slices.Sort(names)
			expect.Equal(t, "DynamoGraphDeploymentRequests listed as v1alpha1 in "+ns,
				[]string{"nvidia.com/v1alpha1 written-alpha", "nvidia.com/v1alpha1 written-beta"}, names)
			return ctx
		}).
		Assess("admission sees v1alpha1 requests in their v1beta1 form: the default image is set, a thorough search with backend auto denied", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			dyn := c.Dynamic()
			const defaulted = "alpha-defaulted"
			created, err := dyn.Resource(v1alpha1Requests).Namespace(ns).Create(ctx,
				request(v1alpha1Requests, ns, defaulted, map[string]any{"model": "meta-llama/Llama-3-8B", "backend": "vllm"}), metav1.CreateOptions{})
			expect.NoError(t, err, "creating v1alpha1 DynamoGraphDeploymentRequest %s/%s without an image", ns, defaulted)
			image, _, _ := unstructured.NestedString(created.Object, "spec", "profilingConfig", "profilerImage")
			expect.Equal(t, "v1alpha1 spec.profilingConfig.profilerImage of "+ns+"/"+defaulted, r.DefaultDGDRImage(c.OperatorVersion()), image)

			const denied = "alpha-thorough-auto"
			_, err = dyn.Resource(v1alpha1Requests).Namespace(ns).Create(ctx, request(v1alpha1Requests, ns, denied, map[string]any{
				"model": "meta-llama/Llama-3-8B", "backend": "auto", "profilingConfig": map[string]any{"useAIConfigurator": false},
			}), metav1.CreateOptions{})
			want := dynamo.DeniedBy(dynamo.GraphDeploymentRequestValidatingWebhook) + ": DynamoGraphDeploymentRequest " + ns + "/" + denied +
				` is invalid: spec.backend: Invalid value: "auto": a thorough search measures one backend on real hardware: name sglang, trtllm or vllm, or use searchStrategy rapid`
			switch {
			case err == nil:
				expect.Errorf(t, "creating v1alpha1 DynamoGraphDeploymentRequest %s/%s (useAIConfigurator false, backend auto): expected the denial %q, saw it admitted", ns, denied, want)
			case err.Error() != want:
				expect.Errorf(t, "creating v1alpha1 DynamoGraphDeploymentRequest %s/%s (useAIConfigurator false, backend auto): expected the denial %q, saw %q", ns, denied, want, err.Error())
			}
			return ctx
		})).
		Feature()
}

func mustGet(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	expect.NoError(t, err, "getting DynamoGraphDeploymentRequest %s/%s as %s", ns, name, gvr.Version)
	return obj
}

// expectSpec checks that obj's spec is exactly want (compared as JSON) and that the
// conversion annotation never shows.
func expectSpec(t *testing.T, what string, want map[string]any, obj *unstructured.Unstructured) {
	t.Helper()
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(obj.Object["spec"])
	if string(w) != string(g) {
		expect.Errorf(t, "%s: expected %s, saw %s", what, w, g)
	}
	if v, ok := obj.GetAnnotations()[conversionAnnotation]; ok {
		expect.Errorf(t, "%s: expected no annotation %s (a lossless round trip needs none), saw %q", what, conversionAnnotation, v)
	}
}

// expectSameObject checks that two reads in different versions are the same stored object.
func expectSameObject(t *testing.T, a, b *unstructured.Unstructured) {
	t.Helper()
	expect.Equal(t, "uid of "+a.GetNamespace()+"/"+a.GetName()+" as "+b.GetAPIVersion()+" (same object as "+a.GetAPIVersion()+")", a.GetUID(), b.GetUID())
	expect.Equal(t, "labels of "+a.GetNamespace()+"/"+a.GetName()+" as "+b.GetAPIVersion(), a.GetLabels(), b.GetLabels())
}

// expectVersions checks that the CRD serves both versions and stores v1beta1.
func expectVersions(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	var got []string
	for _, v := range crd.Spec.Versions {
		got = append(got, fmt.Sprintf("%s served=%t storage=%t", v.Name, v.Served, v.Storage))
	}
	slices.Sort(got)
	expect.Equal(t, "versions of CustomResourceDefinition "+crd.Name, []string{"v1alpha1 served=true storage=false", "v1beta1 served=true storage=true"}, got)
}

// expectConversionService checks that conversions go to the release's webhook Service at /convert.
func expectConversionService(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, r *chart.Release) {
	t.Helper()
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil {
		expect.Fatalf(t, "conversion of CustomResourceDefinition %s: expected strategy Webhook with a Service, saw %s", crd.Name, describeConversion(conv))
	}
	svc := conv.Webhook.ClientConfig.Service
	got := fmt.Sprintf("%s/%s port %d path %s", svc.Namespace, svc.Name, ptrValue(svc.Port), ptrValue(svc.Path))
	want := fmt.Sprintf("%s/%s port 443 path /convert", r.Namespace, r.ServiceName())
	expect.Equal(t, "conversion Service of CustomResourceDefinition "+crd.Name, want, got)
}

func describeConversion(conv *apiextensionsv1.CustomResourceConversion) string {
	if conv == nil {
		return "no conversion"
	}
	b, _ := json.Marshal(conv)
	return string(b)
}

// caBundleVerifiesServed reports whether the CRD's conversion caBundle is set and verifies the
// chain the release's Service serves for its host name, and otherwise what it saw.
func caBundleVerifiesServed(ctx context.Context, c *suite.Cluster, r *chart.Release) (bool, string, error) {
	crd, err := c.CRDs().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, chart.ConversionCRD, metav1.GetOptions{})
	if err != nil {
		return false, err.Error(), nil
	}
	var bundle []byte
	if conv := crd.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
		bundle = conv.Webhook.ClientConfig.CABundle
	}
	if len(bundle) == 0 {
		return false, "the caBundle is empty", nil
	}
	chain, err := c.ServedCertificates(ctx, r.Namespace, r.ServiceName(), 443)
	if err != nil {
		return false, "caBundle " + pki.DescribePEM(bundle) + "; " + err.Error(), nil
	}
	if err := pki.VerifyServed(bundle, chain, r.ServiceHost()); err != nil {
		return false, fmt.Sprintf("caBundle %s does not verify the served %s: %v", pki.DescribePEM(bundle), pki.Describe(chain[0]), err), nil
	}
	return true, "", nil
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
