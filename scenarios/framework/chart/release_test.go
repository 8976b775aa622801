package chart_test

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The names a Release derives must be the chart's: scenarios find objects by them.
func TestReleaseNamesMatchTheRenderedChart(t *testing.T) {
	external, err := pki.NewServingCertificate("x.y.svc")
	require.NoError(t, err)
	for _, r := range []*chart.Release{
		{},
		{Name: "op", Namespace: "platform", Mode: chart.CertManager, IssuerRef: chart.IssuerRef{Kind: "ClusterIssuer", Name: "corp"}},
		{Name: "team", Namespace: "team-a", Mode: chart.External, Serving: external,
			Values: map[string]any{"namespaceRestriction": map[string]any{"enabled": true}, "crds": map[string]any{"install": false},
				"webhook": map[string]any{"certificateSecret": map[string]any{"name": "my-cert"}}}},
	} {
		t.Run(r.String(), func(t *testing.T) {
			vals, err := r.ChartValues()
			require.NoError(t, err)
			name, ns := r.Name, r.Namespace
			if name == "" {
				name, ns = chart.DefaultReleaseName, chart.DefaultNamespace
			}
			objs, err := chart.Render(name, ns, vals)
			require.NoError(t, err)
			for _, want := range []struct{ kind, name string }{
				{"Service", r.ServiceName()},
				{"Deployment", r.DeploymentName()},
				{"ValidatingWebhookConfiguration", r.ValidatingName()},
				{"MutatingWebhookConfiguration", r.MutatingName()},
			} {
				assert.NotNil(t, find(objs, want.kind, want.name), "expected the chart to render %s %s, saw %v", want.kind, want.name, names(objs, want.kind))
			}
			args := deploymentArgs(t, find(objs, "Deployment", r.DeploymentName()))
			assert.True(t, slices.Contains(args, "--webhook-cert-secret="+r.SecretName()), "expected the operator to use Secret %s, saw args %v", r.SecretName(), args)
			got := find(objs, "CustomResourceDefinition", chart.ConversionCRD) != nil
			assert.Equal(t, r.InstallsCRDs(), got, "InstallsCRDs() = %t, but the chart rendered the DGDR CRD: %t", r.InstallsCRDs(), got)
		})
	}
}

func TestChartValuesPerMode(t *testing.T) {
	t.Run("cert-manager issuerRef reaches the Certificate", func(t *testing.T) {
		r := &chart.Release{Mode: chart.CertManager, IssuerRef: chart.IssuerRef{Kind: "ClusterIssuer", Name: "corp-ca"}}
		objs := renderAsDefaultRelease(t, r)
		cert := find(objs, "Certificate", r.ServingCertificateName())
		require.NotNil(t, cert, "expected Certificate %s, saw %v", r.ServingCertificateName(), names(objs, "Certificate"))
		kind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind")
		name, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		assert.Equal(t, "ClusterIssuer", kind, "expected issuerRef ClusterIssuer/corp-ca, saw %s/%s", kind, name)
		assert.Equal(t, "corp-ca", name, "expected issuerRef ClusterIssuer/corp-ca, saw %s/%s", kind, name)
	})
	t.Run("external passes the CA as caBundle", func(t *testing.T) {
		sc, err := pki.NewServingCertificate("dynamo-webhook-service.dynamo-system.svc")
		require.NoError(t, err)
		for _, mode := range []chart.CertMode{chart.External, chart.OLM} {
			r := &chart.Release{Mode: mode, Serving: sc}
			vwc := find(renderAsDefaultRelease(t, r), "ValidatingWebhookConfiguration", r.ValidatingName())
			hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
			for _, h := range hooks {
				ca, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle")
				assert.Equal(t, base64.StdEncoding.EncodeToString(sc.CAPEM), ca, "%s mode: expected every caBundle to be the user's CA, saw %.40q…", mode, ca)
			}
		}
	})
	t.Run("external without a certificate is an error, not a broken install", func(t *testing.T) {
		_, err := (&chart.Release{Mode: chart.External}).ChartValues()
		require.ErrorContains(t, err, "needs a serving certificate", "expected an error naming the missing certificate, saw %v", err)
	})
	t.Run("extra values win over the mode's", func(t *testing.T) {
		r := &chart.Release{Mode: chart.CertManager, Values: map[string]any{"webhook": map[string]any{"failurePolicy": "Ignore"}}}
		vwc := find(renderAsDefaultRelease(t, r), "ValidatingWebhookConfiguration", r.ValidatingName())
		hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
		policy, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "failurePolicy")
		ann := vwc.GetAnnotations()["cert-manager.io/inject-ca-from"]
		assert.Equal(t, "Ignore", policy, "expected failurePolicy Ignore and cert-manager kept, saw %q and inject-ca-from %q", policy, ann)
		assert.NotEmpty(t, ann, "expected failurePolicy Ignore and cert-manager kept, saw %q and inject-ca-from %q", policy, ann)
	})
}

// renderAsDefaultRelease renders r as release DefaultReleaseName in DefaultNamespace, whatever r names.
func renderAsDefaultRelease(t *testing.T, r *chart.Release) []*unstructured.Unstructured {
	t.Helper()
	vals, err := r.ChartValues()
	require.NoError(t, err)
	objs, err := chart.Render(chart.DefaultReleaseName, chart.DefaultNamespace, vals)
	require.NoError(t, err)
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func names(objs []*unstructured.Unstructured, kind string) []string {
	var out []string
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o.GetName())
		}
	}
	return out
}

func deploymentArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	return args
}

func TestMergeValuesMergesMapsAndLetsOverWin(t *testing.T) {
	base := map[string]any{
		"replicas": int64(1),
		"webhook":  map[string]any{"failurePolicy": "Fail", "timeoutSeconds": int64(10)},
		"args":     []any{"a"},
	}
	over := map[string]any{
		"webhook": map[string]any{"failurePolicy": "Ignore"},
		"args":    []any{"b"},
		"image":   map[string]any{"tag": "dev"},
	}
	got := chart.MergeValues(base, over)
	want := map[string]any{
		"replicas": int64(1),
		"webhook":  map[string]any{"failurePolicy": "Ignore", "timeoutSeconds": int64(10)},
		"args":     []any{"b"},
		"image":    map[string]any{"tag": "dev"},
	}
	assert.Equal(t, want, got, "expected %v, saw %v", want, got)
	assert.Equal(t, "Fail", base["webhook"].(map[string]any)["failurePolicy"], "MergeValues changed base: %v", base)
	got["image"].(map[string]any)["tag"] = "changed"
	assert.Equal(t, "dev", over["image"].(map[string]any)["tag"], "the result shares a map with over: %v", over)
	got = chart.MergeValues(nil, nil)
	require.NotNil(t, got, "expected an empty map from two nil maps, saw %#v", got)
	assert.Empty(t, got, "expected an empty map from two nil maps, saw %#v", got)
}

func TestLogLevelIsTheReleasesElseTheCharts(t *testing.T) {
	r := &chart.Release{Values: map[string]any{"logLevel": 128}}
	got, err := r.LogLevel()
	require.NoError(t, err)
	assert.Equal(t, "128", got, "the release's value")

	got, err = (&chart.Release{}).LogLevel()
	require.NoError(t, err)
	assert.Equal(t, "info", got, "the chart's default (values.yaml)")
}

// The operator settings a scenario waits on come from one reader each: the release's value,
// else the chart's values.yaml, and what the reader says is what the rendered Deployment runs.
func TestReleaseSettingsAreWhatTheOperatorRuns(t *testing.T) {
	for _, r := range []*chart.Release{
		{},
		{Values: map[string]any{"webhook": map[string]any{
			"checkInterval": "7s", "caPropagation": "2s",
			"certificateValidity": map[string]any{"ca": "48h", "server": "24h", "lookAhead": "12h"},
		}}},
	} {
		t.Run(fmt.Sprint(r.Values), func(t *testing.T) {
			args := operatorArgs(t, renderAsDefaultRelease(t, r))
			for _, s := range []struct {
				flag string
				read func() (time.Duration, error)
			}{
				{"--cert-check-interval", r.CheckInterval},
				{"--cert-ca-propagation", r.CAPropagation},
				{"--cert-lookahead", r.CertificateLookAhead},
				{"--cert-ca-validity", func() (time.Duration, error) { ca, _, err := r.CertificateValidity(); return ca, err }},
				{"--cert-server-validity", func() (time.Duration, error) { _, server, err := r.CertificateValidity(); return server, err }},
			} {
				d, err := s.read()
				require.NoError(t, err, s.flag)
				var runs time.Duration
				for _, a := range args {
					if v, ok := strings.CutPrefix(a, s.flag+"="); ok {
						runs, err = time.ParseDuration(v)
						require.NoError(t, err, a)
					}
				}
				assert.Equal(t, runs, d, "expected the reader of %s to say what the Deployment runs (args %v)", s.flag, args)
			}
		})
	}
	bad := &chart.Release{Values: map[string]any{"webhook": map[string]any{"checkInterval": "often"}}}
	_, err := bad.CheckInterval()
	require.ErrorContains(t, err, `webhook.checkInterval=often`)
}

func TestOperatorImageRepositoryIsTheImageTheChartRuns(t *testing.T) {
	r := &chart.Release{}
	vals, err := r.ChartValues()
	require.NoError(t, err)
	objs, err := chart.Render(chart.DefaultReleaseName, chart.DefaultNamespace, vals)
	require.NoError(t, err)
	d := find(objs, "Deployment", r.DeploymentName())
	require.NotNil(t, d)
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.NotEmpty(t, containers)
	image, _ := containers[0].(map[string]any)["image"].(string)
	repo, _, _ := strings.Cut(image, ":")
	assert.Equal(t, repo, chart.OperatorImageRepository(), "the chart runs image %s", image)
}
