package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
)

func TestParseConfigRejectsBadFieldsByName(t *testing.T) {
	cases := []struct {
		name, yaml, field, msg string
	}{
		{"unknown field", "servceCIDR: 127.0.100.0/24\n", "servceCIDR", "unknown field"},
		{"wrong kind", "kind: Cluster\n", "kind", "must be LocalCluster"},
		{"wrong apiVersion", "apiVersion: kind.x-k8s.io/v1alpha4\n", "apiVersion", "must be gauntlet.dev/v1alpha1"},
		{"bad name", "name: My_Cluster\n", "name", "DNS label"},
		{"bad version", "kubernetesVersion: 1.37\n", "kubernetesVersion", "must look like v1.37.0"},
		{"privileged port", "ports:\n  apiServer: 443\n", "ports.apiServer", "between 1024 and 65535"},
		{"duplicate port", "ports:\n  apiServer: 21000\n  kubelet: 21000\n", "ports.kubelet", "already used by ports.apiServer"},
		{"service range not loopback", "serviceCIDR: 10.96.0.0/16\n", "serviceCIDR", "inside 127.0.0.0/8"},
		{"service range holds 127.0.0.1", "serviceCIDR: 127.0.0.0/24\n", "serviceCIDR", "must not contain 127.0.0.1"},
		{"service range too large", "serviceCIDR: 127.0.0.0/8\n", "serviceCIDR", "between /16 and /28"},
		{"service range host bits", "serviceCIDR: 127.0.100.1/24\n", "serviceCIDR", "did you mean 127.0.100.0/24"},
		{"service range garbage", "serviceCIDR: loopback\n", "serviceCIDR", "IPv4 CIDR"},
		{"pod range loopback", "podCIDR: 127.1.0.0/24\n", "podCIDR", "must not be loopback"},
		{"pod range IPv6", "podCIDR: fd00::/64\n", "podCIDR", "must be IPv4"},
		{"image with tag", "images:\n  example.com/op:v1: /bin/true\n", "images[example.com/op:v1]", "without tag or digest"},
		{"image with digest", "images:\n  example.com/op@sha256:abc: /bin/true\n", "images[example.com/op@sha256:abc]", "without tag or digest"},
		{"image without binary", "images:\n  example.com/op: \"\"\n", "images[example.com/op]", "must not be empty"},
		{"image program at a relative path", "images:\n  example.com/op: {binary: /bin/true, entrypoint: /manager, programs: {crd-apply: /bin/true}}\n", "images[example.com/op]", `"crd-apply" is no path in an image`},
		{"bad cert-manager namespace", "certManager:\n  namespace: Cert_Manager\n", "certManager.namespace", "DNS label"},
		{"wrong type", "ports:\n  apiServer: high\n", "apiServer", "cannot unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			require.Error(t, err, "config %q was accepted", tc.yaml)
			require.Contains(t, err.Error(), tc.field, "error %q does not name field %q with %q", err, tc.field, tc.msg)
			require.Contains(t, err.Error(), tc.msg, "error %q does not name field %q with %q", err, tc.field, tc.msg)
		})
	}
}

func TestParseConfigAcceptsFullConfig(t *testing.T) {
	raw := `apiVersion: gauntlet.dev/v1alpha1
kind: LocalCluster
name: dev
kubernetesVersion: v1.37.0
ports: {apiServer: 21000, etcd: 21001, etcdPeer: 21002, controllerManager: 21003, scheduler: 21004, kubelet: 21005}
serviceCIDR: 127.0.50.0/24
podCIDR: 10.250.0.0/24
binaries: {dir: /opt/k8s/bin}
images: {example.com/op: /usr/local/bin/op}
certManager: {enabled: true}
`
	cfg, err := ParseConfig([]byte(raw))
	require.NoError(t, err)
	require.NoError(t, cfg.Complete("dev", nil))
	require.Equal(t, 21005, cfg.Ports.Kubelet, "explicit values were changed: %+v", cfg)
	require.Equal(t, "127.0.50.0/24", cfg.ServiceCIDR, "explicit values were changed: %+v", cfg)
	require.Equal(t, "10.250.0.1", cfg.PodHostIP(), "explicit values were changed: %+v", cfg)
	require.Equal(t, "cert-manager", cfg.CertManager.Namespace, "cert-manager namespace default = %q", cfg.CertManager.Namespace)
}

func TestCompleteDerivesDistinctSettingsPerName(t *testing.T) {
	a, b := &Config{}, &Config{}
	require.NoError(t, a.Complete("alpha", nil))
	require.NoError(t, b.Complete("beta", []*Config{a}))
	require.NoError(t, b.Conflicts([]*Config{a}), "derived settings collide")
	again := &Config{}
	require.NoError(t, again.Complete("alpha", nil))
	require.Equal(t, a.Ports, again.Ports, "derivation is not stable: %+v vs %+v", again, a)
	require.Equal(t, a.ServiceCIDR, again.ServiceCIDR, "derivation is not stable: %+v vs %+v", again, a)
	require.Equal(t, a.PodCIDR, again.PodCIDR, "derivation is not stable: %+v vs %+v", again, a)
}

func TestCompleteSkipsSlotsOfExistingClusters(t *testing.T) {
	a := &Config{}
	require.NoError(t, a.Complete("alpha", nil))
	// Same name hash, different cluster: "alpha" is taken by another cluster called "other".
	taken := *a
	taken.Name = "other"
	b := &Config{}
	require.NoError(t, b.Complete("alpha", []*Config{&taken}))
	require.NotEqual(t, a.Ports.APIServer, b.Ports.APIServer, "slot of an existing cluster reused: %+v", b)
	require.NotEqual(t, a.ServiceCIDR, b.ServiceCIDR, "slot of an existing cluster reused: %+v", b)
	require.NotEqual(t, a.PodCIDR, b.PodCIDR, "slot of an existing cluster reused: %+v", b)
	require.NoError(t, b.Conflicts([]*Config{&taken}))
}

func TestConflictsNamesTheCollidingField(t *testing.T) {
	a := &Config{}
	require.NoError(t, a.Complete("alpha", nil))
	b := &Config{ServiceCIDR: a.ServiceCIDR, Ports: Ports{Kubelet: a.Ports.APIServer}}
	require.NoError(t, b.Complete("beta", []*Config{a}))
	err := b.Conflicts([]*Config{a})
	for _, want := range []string{`ports.kubelet`, `used by cluster "alpha" (ports.apiServer)`, `serviceCIDR`, `overlaps cluster "alpha"`} {
		require.ErrorContains(t, err, want, "conflict error %v does not mention %q", err, want)
	}
}

func TestCompleteRejectsNameMismatch(t *testing.T) {
	cfg := &Config{Name: "dev"}
	err := cfg.Complete("prod", nil)
	require.ErrorContains(t, err, `name: invalid value "dev": does not match the cluster name "prod"`, "got %v", err)
}

func TestLoadConfigResolvesRelativePaths(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	require.NoError(t, os.WriteFile(path, []byte("binaries: {dir: bin}\nimages:\n  example.com/op: op\n"+
		"  example.com/multi: {binary: manager, entrypoint: /manager, programs: {/crd-apply: crd-apply}, files: {/opt/crds: crds}}\n"), 0o600))
	cfg, err := LoadConfig(path)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "bin"), cfg.Binaries.Dir, "relative paths not resolved against %s: %+v", dir, cfg)
	require.Equal(t, procnode.Image{Binary: filepath.Join(dir, "op")}, cfg.Images["example.com/op"], "relative paths not resolved against %s: %+v", dir, cfg)
	require.Equal(t, procnode.Image{Binary: filepath.Join(dir, "manager"), Entrypoint: "/manager",
		Programs: map[string]string{"/crd-apply": filepath.Join(dir, "crd-apply")}, Files: map[string]string{"/opt/crds": filepath.Join(dir, "crds")}},
		cfg.Images["example.com/multi"], "an image's programs and files resolved against %s, its paths in the image kept", dir)
	_, err = LoadConfig(filepath.Join(dir, "missing.yaml"))
	require.ErrorContains(t, err, "reading cluster config", "missing file: %v", err)
}

func TestRenderKwokConfigCarriesTheRecipe(t *testing.T) {
	cfg := &Config{}
	require.NoError(t, cfg.Complete("recipe", nil))
	cfg.Binaries = Binaries{Etcd: "/b/etcd", KubeAPIServer: "/b/kube-apiserver", KubeControllerManager: "/b/kcm", KubeScheduler: "/b/ks", Kubectl: "/b/kubectl"}
	raw, err := renderKwokConfig(cfg, newLayout("recipe"))
	require.NoError(t, err)
	for _, want := range []string{
		"runtime: binary", "bindAddress: 127.0.0.1", "- kwok-controller",
		"key: service-cluster-ip-range\n    value: " + cfg.ServiceCIDR,
		"key: advertise-address\n    value: 127.0.0.1", "key: endpoint-reconciler-type\n    value: none",
		"- " + cfg.PodHostIP(), "kubeApiserverBinary: /b/kube-apiserver",
	} {
		assert.Contains(t, string(raw), want, "kwokctl config lacks %q:\n%s", want, raw)
	}
	assert.Equal(t, 2, strings.Count(string(raw), "service-cluster-ip-range"), "service range must be given to kube-apiserver and kube-controller-manager:\n%s", raw)
}
