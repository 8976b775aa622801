package install_test

import (
	"crypto/x509"
	"encoding/base64"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/install"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The names a Release derives must be the chart's: scenarios find objects by them.
func TestReleaseNamesMatchTheRenderedChart(t *testing.T) {
	external, err := install.NewServingCertificate("x.y.svc")
	require.NoError(t, err)
	for _, r := range []*install.Release{
		{},
		{Name: "op", Namespace: "platform", Mode: install.CertManager, IssuerRef: install.IssuerRef{Kind: "ClusterIssuer", Name: "corp"}},
		{Name: "team", Namespace: "team-a", Mode: install.External, Serving: external,
			Values: map[string]any{"namespaceRestriction": map[string]any{"enabled": true}, "crds": map[string]any{"install": false},
				"webhook": map[string]any{"certificateSecret": map[string]any{"name": "my-cert"}}}},
	} {
		t.Run(r.String(), func(t *testing.T) {
			vals, err := r.ChartValues()
			require.NoError(t, err)
			name, ns := r.Name, r.Namespace
			if name == "" {
				name, ns = install.DefaultReleaseName, install.DefaultNamespace
			}
			objs, err := install.Render(name, ns, vals)
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
			got := find(objs, "CustomResourceDefinition", install.ConversionCRD) != nil
			assert.Equal(t, r.InstallsCRDs(), got, "InstallsCRDs() = %t, but the chart rendered the DGDR CRD: %t", r.InstallsCRDs(), got)
		})
	}
}

func TestChartValuesPerMode(t *testing.T) {
	t.Run("cert-manager issuerRef reaches the Certificate", func(t *testing.T) {
		r := &install.Release{Mode: install.CertManager, IssuerRef: install.IssuerRef{Kind: "ClusterIssuer", Name: "corp-ca"}}
		objs := renderRelease(t, r)
		cert := find(objs, "Certificate", r.ServingCertificateName())
		require.NotNil(t, cert, "expected Certificate %s, saw %v", r.ServingCertificateName(), names(objs, "Certificate"))
		kind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind")
		name, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		assert.Equal(t, "ClusterIssuer", kind, "expected issuerRef ClusterIssuer/corp-ca, saw %s/%s", kind, name)
		assert.Equal(t, "corp-ca", name, "expected issuerRef ClusterIssuer/corp-ca, saw %s/%s", kind, name)
	})
	t.Run("external passes the CA as caBundle", func(t *testing.T) {
		sc, err := install.NewServingCertificate("dynamo-webhook-service.dynamo-system.svc")
		require.NoError(t, err)
		for _, mode := range []install.CertMode{install.External, install.OLM} {
			r := &install.Release{Mode: mode, Serving: sc}
			vwc := find(renderRelease(t, r), "ValidatingWebhookConfiguration", r.ValidatingName())
			hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
			for _, h := range hooks {
				ca, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle")
				assert.Equal(t, base64.StdEncoding.EncodeToString(sc.CAPEM), ca, "%s mode: expected every caBundle to be the user's CA, saw %.40q…", mode, ca)
			}
		}
	})
	t.Run("external without a certificate is an error, not a broken install", func(t *testing.T) {
		_, err := (&install.Release{Mode: install.External}).ChartValues()
		require.ErrorContains(t, err, "needs a serving certificate", "expected an error naming the missing certificate, saw %v", err)
	})
	t.Run("extra values win over the mode's", func(t *testing.T) {
		r := &install.Release{Mode: install.CertManager, Values: map[string]any{"webhook": map[string]any{"failurePolicy": "Ignore"}}}
		vwc := find(renderRelease(t, r), "ValidatingWebhookConfiguration", r.ValidatingName())
		hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
		policy, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "failurePolicy")
		ann := vwc.GetAnnotations()["cert-manager.io/inject-ca-from"]
		assert.Equal(t, "Ignore", policy, "expected failurePolicy Ignore and cert-manager kept, saw %q and inject-ca-from %q", policy, ann)
		assert.NotEmpty(t, ann, "expected failurePolicy Ignore and cert-manager kept, saw %q and inject-ca-from %q", policy, ann)
	})
}

func TestServingCertificates(t *testing.T) {
	sc, err := install.NewServingCertificate("svc.ns.svc")
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(sc.CAPEM)
	_, err = sc.Leaf.Verify(x509.VerifyOptions{DNSName: "svc.ns.svc", Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err, "expected the serving certificate to verify for svc.ns.svc against its CA, saw %v", err)
	ca, err := install.NewCertificateAuthority("t", time.Hour)
	require.NoError(t, err)
	expired, err := ca.Issue(install.LeafOptions{DNSNames: []string{"a"}, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	assert.True(t, expired.Leaf.NotAfter.Before(time.Now()), "expected an expired certificate, saw %s", install.Describe(expired.Leaf))
	olm := install.ServingSecret("ns", "s", sc, true)
	_, ok := olm.Data["tls.cert"]
	assert.False(t, !ok || olm.Data["tls.crt"] != nil || string(olm.Type) != "Opaque", "expected an Opaque Secret with OLM's tls.cert, saw type %s keys %v", olm.Type, keysOf(olm.Data))
	info := install.Describe(sc.Leaf).String()
	assert.Contains(t, info, "svc.ns.svc", "expected a description with SANs and serial and no key, saw %s", info)
	assert.Contains(t, info, install.SerialHex(sc.Leaf), "expected a description with SANs and serial and no key, saw %s", info)
	assert.NotContains(t, info, "PRIVATE", "expected a description with SANs and serial and no key, saw %s", info)
}

func TestCABundlesSayWhatIsMissing(t *testing.T) {
	a, _ := install.NewServingCertificate("a")
	b, _ := install.NewServingCertificate("b")
	bundles := install.CABundles{"one": a.CAPEM, "two": b.CAPEM, "three": nil}
	got := bundles.Missing(a.CAPEM)
	assert.True(t, slices.Equal(got, []string{"three", "two"}), "expected places without CA a to be [three two], saw %v", got)
	desc := bundles.DescribeMissing(a.CAPEM)
	assert.Contains(t, desc, "three: empty", "expected the description to name the empty bundle and the other CA's serial, saw %q", desc)
	assert.Contains(t, desc, "two: holds", "expected the description to name the empty bundle and the other CA's serial, saw %q", desc)
	assert.Contains(t, desc, install.SerialHex(b.CA), "expected the description to name the empty bundle and the other CA's serial, saw %q", desc)
}

func TestCABundlesSayWhereACAIsRepeated(t *testing.T) {
	a, err := install.NewServingCertificate("a")
	require.NoError(t, err)
	b, err := install.NewServingCertificate("b")
	require.NoError(t, err)
	twice := append(append(append([]byte{}, a.CAPEM...), b.CAPEM...), a.CAPEM...)
	bundles := install.CABundles{"once": a.CAPEM, "twice": twice, "other": b.CAPEM, "empty": nil}
	assert.Equal(t, []string{"twice: 2 copies"}, bundles.Repeated(a.CA))
	assert.Empty(t, bundles.Repeated(b.CA))
}

func renderRelease(t *testing.T, r *install.Release) []*unstructured.Unstructured {
	t.Helper()
	vals, err := r.ChartValues()
	require.NoError(t, err)
	objs, err := install.Render(install.DefaultReleaseName, install.DefaultNamespace, vals)
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

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
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
	got := install.MergeValues(base, over)
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
	got = install.MergeValues(nil, nil)
	require.NotNil(t, got, "expected an empty map from two nil maps, saw %#v", got)
	assert.Empty(t, got, "expected an empty map from two nil maps, saw %#v", got)
}

func TestLogLevelIsTheReleasesElseTheCharts(t *testing.T) {
	r := &install.Release{Values: map[string]any{"logLevel": 128}}
	got, err := r.LogLevel()
	require.NoError(t, err)
	assert.Equal(t, "128", got, "the release's value")

	got, err = (&install.Release{}).LogLevel()
	require.NoError(t, err)
	assert.Equal(t, "info", got, "the chart's default (values.yaml)")
}
