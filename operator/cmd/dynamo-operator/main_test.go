package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/testcluster"
	"github.com/gauntlet-dev/gauntlet/operator/internal/version"
)

// The test wires the operator exactly as a cluster would: the apiserver has a loopback service
// range, so it dials the webhook Service's ClusterIP:port with TLS ServerName
// <svc>.<ns>.svc, and the operator (run in-process through run()) answers on that port. Nothing
// about TLS, caBundle injection or routing is mocked.
const (
	serviceCIDR     = "127.0.100.0/24"
	serviceIP       = "127.0.100.50"
	operatorNS      = "dynamo-system"
	release         = "dynamo"
	webhookService  = release + "-webhook-service"
	validatingName  = release + "-validating"
	mutatingName    = release + "-mutating"
	dgdrCRD         = "dynamographdeploymentrequests.nvidia.com"
	webhookPortTest = 19443
)

func TestOperatorServesWebhooksThroughTheAPIServer(t *testing.T) {
	env := testcluster.Start(t, testcluster.WithServiceCIDR(serviceCIDR))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := env.Client

	clusterWidePlumbing.install(ctx, t, c)

	var logs testcluster.LogBuffer
	metricsAddr := freeAddr(t)
	opts, err := parseOptions(flag.NewFlagSet("test", flag.ContinueOnError), append(clusterWidePlumbing.args(),
		"--operator-namespace="+operatorNS,
		"--conversion-crd="+dgdrCRD,
		"--webhook-cert-dir="+t.TempDir(),
		"--metrics-bind-address="+metricsAddr,
		"--health-probe-bind-address=127.0.0.1:0",
		"--cert-check-interval=1s",
	))
	require.NoError(t, err)
	installLogger(opts, io.MultiWriter(&logs, os.Stderr)) // as main does: JSON lines

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, nil, env.Config, opts) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			assert.NoError(t, err, "operator returned an error on shutdown")
		case <-time.After(30 * time.Second):
			t.Error("operator did not stop within 30s of cancellation")
		}
	})

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-x"}}
	require.NoError(t, c.Create(ctx, ns))

	t.Run("automatic mode creates the Secret and injects every caBundle", func(t *testing.T) {
		var secret corev1.Secret
		eventually(t, "Secret dynamo-system/webhook-server-cert to exist", func() error {
			return c.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: "webhook-server-cert"}, &secret)
		})
		assert.Equal(t, corev1.SecretTypeTLS, secret.Type)
		ca := secret.Data["ca.crt"]
		require.NotEmpty(t, ca, "Secret has no ca.crt")
		eventually(t, "caBundle in every webhook and the DGDR CRD to contain the Secret's CA", func() error {
			return caBundlesContain(ctx, c, ca)
		})
	})

	t.Run("an invalid DynamoGraphDeployment is denied with kind, namespace/name and field", func(t *testing.T) {
		bad := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Name: "no-services", Namespace: ns.Name}}
		var err error
		eventually(t, "the webhook to answer (a denial, not a call failure)", func() error {
			err = c.Create(ctx, bad)
			if err == nil {
				return errors.New("invalid object was admitted")
			}
			if strings.Contains(err.Error(), "failed calling webhook") {
				return err
			}
			return nil
		})
		assert.Contains(t, err.Error(), `admission webhook "vdynamographdeployment.nvidia.com" denied the request`)
		assert.Contains(t, err.Error(), "team-x/no-services")
		assert.Contains(t, err.Error(), "spec.services")
	})

	t.Run("a valid DynamoGraphDeployment is admitted, stamped, and gets the finalizer", func(t *testing.T) {
		good := &v1alpha1.DynamoGraphDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "graph", Namespace: ns.Name},
			Spec: v1alpha1.DynamoGraphDeploymentSpec{
				BackendFramework: "vllm",
				Services:         map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"frontend": {Replicas: ptr.To[int32](1)}},
			},
		}
		require.NoError(t, c.Create(ctx, good))
		assert.Equal(t, version.Version, good.Annotations[v1alpha1.OperatorOriginVersionAnnotation])
		eventually(t, "the operator to add its finalizer", func() error {
			var got v1alpha1.DynamoGraphDeployment
			if err := c.Get(ctx, client.ObjectKeyFromObject(good), &got); err != nil {
				return err
			}
			if !slices.Contains(got.Finalizers, v1alpha1.DynamoGraphDeploymentFinalizer) {
				return errors.New("finalizer not added yet")
			}
			return nil
		})
		require.NoError(t, c.Delete(ctx, good))
		eventually(t, "the operator to remove its finalizer so deletion completes", func() error {
			err := c.Get(ctx, client.ObjectKeyFromObject(good), &v1alpha1.DynamoGraphDeployment{})
			if err == nil {
				return errors.New("still present")
			}
			return client.IgnoreNotFound(err)
		})
	})

	t.Run("a DGDR created as v1alpha1 is converted by the webhook and defaulted", func(t *testing.T) {
		alpha := &v1alpha1.DynamoGraphDeploymentRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "req", Namespace: ns.Name},
			Spec: v1alpha1.DynamoGraphDeploymentRequestSpec{
				Model: "llama", Backend: "vllm",
				ProfilingConfig: &v1alpha1.ProfilingConfig{UseAIConfigurator: ptr.To(true)},
			},
		}
		require.NoError(t, c.Create(ctx, alpha))
		var beta v1beta1.DynamoGraphDeploymentRequest
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(alpha), &beta))
		assert.Equal(t, v1beta1.SearchStrategyRapid, beta.Spec.SearchStrategy)
		assert.Equal(t, opts.defaultDGDRImage, beta.Spec.Image, "mutating webhook did not set the default image")
	})

	exposureChecks(ctx, t, env, metricsAddr, &logs)

	t.Run("the documented log lines are written", func(t *testing.T) {
		for _, line := range []string{"Registering validation webhooks", "Starting webhook server", "validate create"} {
			assert.Contains(t, logs.String(), line)
		}
	})
}

// webhookPlumbing is what the chart would create for a release whose operator runs in
// namespace and serves on port: the namespace, the webhook Service (its port is the operator's
// port, since no kube-proxy translates 443 → 9443 here), both webhook configurations from the
// generated manifest with empty caBundles, and — for the cluster-wide release — the DGDR CRD's
// conversion webhook.
type webhookPlumbing struct {
	namespace string
	port      int32
	// restrictedTo renders a namespace-restricted release as the chart does: its webhook
	// configurations named after the namespace, selecting only it, failurePolicy Ignore.
	restrictedTo string
}

// clusterWidePlumbing is the cluster-wide release of the tests that run one.
var clusterWidePlumbing = webhookPlumbing{namespace: operatorNS, port: webhookPortTest}

func (p webhookPlumbing) validatingName() string { return p.suffixed(validatingName) }
func (p webhookPlumbing) mutatingName() string   { return p.suffixed(mutatingName) }

func (p webhookPlumbing) suffixed(name string) string {
	if p.restrictedTo == "" {
		return name
	}
	return name + "-" + p.restrictedTo
}

// args are the operator's flags that name the plumbing.
func (p webhookPlumbing) args() []string {
	return []string{
		"--webhook-service=" + webhookService,
		"--validating-webhook-configuration=" + p.validatingName(),
		"--mutating-webhook-configuration=" + p.mutatingName(),
		"--webhook-port=" + strconv.Itoa(int(p.port)),
	}
}

func (p webhookPlumbing) install(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}}))
	require.NoError(t, c.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: webhookService, Namespace: p.namespace},
		Spec: corev1.ServiceSpec{
			ClusterIP: serviceIP,
			Ports:     []corev1.ServicePort{{Port: p.port, TargetPort: intstr.FromInt32(p.port)}},
		},
	}))
	ref := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: p.namespace, Name: webhookService, Path: ptr.To(path), Port: ptr.To(p.port),
		}}
	}
	var selector *metav1.LabelSelector
	failurePolicy := admissionregistrationv1.Fail
	if p.restrictedTo != "" {
		selector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: p.restrictedTo}}
		failurePolicy = admissionregistrationv1.Ignore
	}
	vwc, mwc, err := testcluster.GeneratedWebhookConfigurations()
	require.NoError(t, err)
	vwc.Name, mwc.Name = p.validatingName(), p.mutatingName()
	for i := range vwc.Webhooks {
		w := &vwc.Webhooks[i]
		w.ClientConfig, w.NamespaceSelector, w.FailurePolicy = ref(*w.ClientConfig.Service.Path), selector, ptr.To(failurePolicy)
	}
	for i := range mwc.Webhooks {
		w := &mwc.Webhooks[i]
		w.ClientConfig, w.NamespaceSelector, w.FailurePolicy = ref(*w.ClientConfig.Service.Path), selector, ptr.To(failurePolicy)
	}
	require.NoError(t, c.Create(ctx, vwc))
	require.NoError(t, c.Create(ctx, mwc))
	if p.restrictedTo != "" {
		return
	}

	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: dgdrCRD}, &crd))
	conv := ref("/convert")
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
				Namespace: p.namespace, Name: webhookService, Path: conv.Service.Path, Port: conv.Service.Port,
			}},
		},
	}
	require.NoError(t, c.Update(ctx, &crd))
}

func caBundlesContain(ctx context.Context, c client.Client, ca []byte) error {
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: validatingName}, &vwc); err != nil {
		return err
	}
	for _, w := range vwc.Webhooks {
		if !bytes.Contains(w.ClientConfig.CABundle, ca) {
			return errors.New("validating webhook " + w.Name + " lacks the CA")
		}
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: mutatingName}, &mwc); err != nil {
		return err
	}
	for _, w := range mwc.Webhooks {
		if !bytes.Contains(w.ClientConfig.CABundle, ca) {
			return errors.New("mutating webhook " + w.Name + " lacks the CA")
		}
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: dgdrCRD}, &crd); err != nil {
		return err
	}
	if !bytes.Contains(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, ca) {
		return errors.New("CRD " + dgdrCRD + " conversion webhook lacks the CA")
	}
	return nil
}

// eventually polls cond until it returns nil, failing the test with what was awaited and the
// last error seen.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 45s for %s; last seen: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
