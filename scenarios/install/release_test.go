package install_test

import (
	"crypto/x509"
	"encoding/base64"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/scenarios/install"
)

// The names a Release derives must be the chart's: scenarios find objects by them.
func TestReleaseNamesMatchTheRenderedChart(t *testing.T) {
	external, err := install.NewServingCertificate("x.y.svc")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*install.Release{
		{},
		{Name: "op", Namespace: "platform", Mode: install.CertManager, IssuerRef: install.IssuerRef{Kind: "ClusterIssuer", Name: "corp"}},
		{Name: "team", Namespace: "team-a", Mode: install.External, Serving: external,
			Values: map[string]any{"namespaceRestriction": map[string]any{"enabled": true}, "crds": map[string]any{"install": false},
				"webhook": map[string]any{"certificateSecret": map[string]any{"name": "my-cert"}}}},
	} {
		t.Run(r.String(), func(t *testing.T) {
			vals, err := r.ChartValues()
			if err != nil {
				t.Fatal(err)
			}
			name, ns := r.Name, r.Namespace
			if name == "" {
				name, ns = install.DefaultReleaseName, install.DefaultNamespace
			}
			objs, err := install.Render(name, ns, vals)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []struct{ kind, name string }{
				{"Service", r.ServiceName()},
				{"Deployment", r.DeploymentName()},
				{"ValidatingWebhookConfiguration", r.ValidatingName()},
				{"MutatingWebhookConfiguration", r.MutatingName()},
			} {
				if find(objs, want.kind, want.name) == nil {
					t.Errorf("expected the chart to render %s %s, saw %v", want.kind, want.name, names(objs, want.kind))
				}
			}
			args := deploymentArgs(t, find(objs, "Deployment", r.DeploymentName()))
			if !slices.Contains(args, "--webhook-cert-secret="+r.SecretName()) {
				t.Errorf("expected the operator to use Secret %s, saw args %v", r.SecretName(), args)
			}
			if got := find(objs, "CustomResourceDefinition", install.ConversionCRD) != nil; got != r.InstallsCRDs() {
				t.Errorf("InstallsCRDs() = %t, but the chart rendered the DGDR CRD: %t", r.InstallsCRDs(), got)
			}
		})
	}
}

func TestChartValuesPerMode(t *testing.T) {
	t.Run("cert-manager issuerRef reaches the Certificate", func(t *testing.T) {
		r := &install.Release{Mode: install.CertManager, IssuerRef: install.IssuerRef{Kind: "ClusterIssuer", Name: "corp-ca"}}
		objs := renderRelease(t, r)
		cert := find(objs, "Certificate", r.ServingCertificateName())
		if cert == nil {
			t.Fatalf("expected Certificate %s, saw %v", r.ServingCertificateName(), names(objs, "Certificate"))
		}
		kind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind")
		name, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		if kind != "ClusterIssuer" || name != "corp-ca" {
			t.Errorf("expected issuerRef ClusterIssuer/corp-ca, saw %s/%s", kind, name)
		}
	})
	t.Run("external passes the CA as caBundle", func(t *testing.T) {
		sc, err := install.NewServingCertificate("dynamo-webhook-service.dynamo-system.svc")
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []install.CertMode{install.External, install.OLM} {
			r := &install.Release{Mode: mode, Serving: sc}
			vwc := find(renderRelease(t, r), "ValidatingWebhookConfiguration", r.ValidatingName())
			hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
			for _, h := range hooks {
				ca, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle")
				if ca != base64.StdEncoding.EncodeToString(sc.CAPEM) {
					t.Errorf("%s mode: expected every caBundle to be the user's CA, saw %.40q…", mode, ca)
				}
			}
		}
	})
	t.Run("external without a certificate is an error, not a broken install", func(t *testing.T) {
		_, err := (&install.Release{Mode: install.External}).ChartValues()
		if err == nil || !strings.Contains(err.Error(), "needs a serving certificate") {
			t.Errorf("expected an error naming the missing certificate, saw %v", err)
		}
	})
	t.Run("extra values win over the mode's", func(t *testing.T) {
		r := &install.Release{Mode: install.CertManager, Values: map[string]any{"webhook": map[string]any{"failurePolicy": "Ignore"}}}
		vwc := find(renderRelease(t, r), "ValidatingWebhookConfiguration", r.ValidatingName())
		hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
		policy, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "failurePolicy")
		ann := vwc.GetAnnotations()["cert-manager.io/inject-ca-from"]
		if policy != "Ignore" || ann == "" {
			t.Errorf("expected failurePolicy Ignore and cert-manager kept, saw %q and inject-ca-from %q", policy, ann)
		}
	})
}

func TestServingCertificates(t *testing.T) {
	sc, err := install.NewServingCertificate("svc.ns.svc")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(sc.CAPEM)
	if _, err := sc.Leaf.Verify(x509.VerifyOptions{DNSName: "svc.ns.svc", Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("expected the serving certificate to verify for svc.ns.svc against its CA, saw %v", err)
	}
	ca, err := install.NewCertificateAuthority("t", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := ca.Issue(install.LeafOptions{DNSNames: []string{"a"}, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !expired.Leaf.NotAfter.Before(time.Now()) {
		t.Errorf("expected an expired certificate, saw %s", install.Describe(expired.Leaf))
	}
	olm := install.ServingSecret("ns", "s", sc, true)
	if _, ok := olm.Data["tls.cert"]; !ok || olm.Data["tls.crt"] != nil || string(olm.Type) != "Opaque" {
		t.Errorf("expected an Opaque Secret with OLM's tls.cert, saw type %s keys %v", olm.Type, keysOf(olm.Data))
	}
	info := install.Describe(sc.Leaf).String()
	if !strings.Contains(info, "svc.ns.svc") || !strings.Contains(info, install.SerialHex(sc.Leaf)) || strings.Contains(info, "PRIVATE") {
		t.Errorf("expected a description with SANs and serial and no key, saw %s", info)
	}
}

func TestCABundlesSayWhatIsMissing(t *testing.T) {
	a, _ := install.NewServingCertificate("a")
	b, _ := install.NewServingCertificate("b")
	bundles := install.CABundles{"one": a.CAPEM, "two": b.CAPEM, "three": nil}
	if got := bundles.Missing(a.CAPEM); !slices.Equal(got, []string{"three", "two"}) {
		t.Errorf("expected places without CA a to be [three two], saw %v", got)
	}
	desc := bundles.DescribeMissing(a.CAPEM)
	if !strings.Contains(desc, "three: empty") || !strings.Contains(desc, "two: holds") || !strings.Contains(desc, install.SerialHex(b.CA)) {
		t.Errorf("expected the description to name the empty bundle and the other CA's serial, saw %q", desc)
	}
}

func renderRelease(t *testing.T, r *install.Release) []*unstructured.Unstructured {
	t.Helper()
	vals, err := r.ChartValues()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := install.Render(install.DefaultReleaseName, install.DefaultNamespace, vals)
	if err != nil {
		t.Fatal(err)
	}
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
	if !reflect.DeepEqual(got, want) {
		t.Errorf("expected %v, saw %v", want, got)
	}
	if base["webhook"].(map[string]any)["failurePolicy"] != "Fail" {
		t.Errorf("MergeValues changed base: %v", base)
	}
	got["image"].(map[string]any)["tag"] = "changed"
	if over["image"].(map[string]any)["tag"] != "dev" {
		t.Errorf("the result shares a map with over: %v", over)
	}
	if got := install.MergeValues(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("expected an empty map from two nil maps, saw %#v", got)
	}
}
