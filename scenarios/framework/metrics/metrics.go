// Package metrics reads a release's operator /metrics the way a user's Prometheus does (HTTPS
// to the pod, with the token of a ServiceAccount allowed to get /metrics) and parses the
// Prometheus exposition into samples to sum and compare.
package metrics

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
)

// MetricsScraper is the ServiceAccount, in the release namespace, that the harness scrapes an
// operator's /metrics as.
const MetricsScraper = "gauntlet-metrics-scraper"

// metricsTokenTTL is how long a scraper token is valid; Reader renews it at half time.
const metricsTokenTTL = time.Hour

// Reader reads a release's /metrics the way a user's Prometheus does: the operator serves
// it over HTTPS (a self-signed certificate) to bearer tokens allowed to get /metrics, and the
// reader's token belongs to ServiceAccount MetricsScraper bound to the release's metrics-reader
// ClusterRole. The binding (and the ServiceAccount) are owned by that ClusterRole, so
// uninstalling the release removes them.
type Reader struct {
	kube kubernetes.Interface
	rel  *chart.Release

	mu      sync.Mutex
	token   string
	renewAt time.Time
}

// NewReader returns a reader of r's metrics; nothing is created before the first Token.
func NewReader(kube kubernetes.Interface, r *chart.Release) *Reader {
	return &Reader{kube: kube, rel: r}
}

// Token returns a bearer token allowed to get /metrics from r's operator, creating the
// ServiceAccount and its binding the first time and a new token when half the last one's
// lifetime is gone.
func (m *Reader) Token(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.token != "" && time.Now().Before(m.renewAt) {
		return m.token, nil
	}
	d := m.rel.WithDefaults()
	reader := m.rel.MetricsReaderName()
	role, err := m.kube.RbacV1().ClusterRoles().Get(ctx, reader, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading ClusterRole %s, which grants get /metrics of %s: %w", reader, m.rel, err)
	}
	owner := []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: role.Name, UID: role.UID}}
	// Left over from an earlier install of the release, they are still owned by its deleted
	// ClusterRole: the garbage collector would remove them under us. Adopt them.
	sas := m.kube.CoreV1().ServiceAccounts(d.Namespace)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: MetricsScraper, Namespace: d.Namespace, OwnerReferences: owner}}
	if _, err := sas.Create(ctx, sa, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		if sa, err = sas.Get(ctx, MetricsScraper, metav1.GetOptions{}); err == nil && !ownedBy(sa.OwnerReferences, role.UID) {
			sa.OwnerReferences = owner
			_, err = sas.Update(ctx, sa, metav1.UpdateOptions{})
		}
		if err != nil {
			return "", fmt.Errorf("adopting ServiceAccount %s/%s: %w", d.Namespace, MetricsScraper, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("creating ServiceAccount %s/%s to scrape %s: %w", d.Namespace, MetricsScraper, m.rel, err)
	}
	crbs := m.kube.RbacV1().ClusterRoleBindings()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reader + "-" + MetricsScraper, OwnerReferences: owner},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: MetricsScraper, Namespace: d.Namespace}},
	}
	if _, err := crbs.Create(ctx, binding, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		if binding, err = crbs.Get(ctx, binding.Name, metav1.GetOptions{}); err == nil && !ownedBy(binding.OwnerReferences, role.UID) {
			binding.OwnerReferences = owner
			_, err = crbs.Update(ctx, binding, metav1.UpdateOptions{})
		}
		if err != nil {
			return "", fmt.Errorf("adopting ClusterRoleBinding %s: %w", reader+"-"+MetricsScraper, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("binding ClusterRole %s to ServiceAccount %s/%s: %w", reader, d.Namespace, MetricsScraper, err)
	}
	expiration := int64(metricsTokenTTL.Seconds())
	tr, err := sas.CreateToken(ctx, MetricsScraper, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiration},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", d.Namespace, MetricsScraper, err)
	}
	m.token, m.renewAt = tr.Status.Token, time.Now().Add(metricsTokenTTL/2)
	return m.token, nil
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// Client is an HTTP client for the operator's metrics endpoint (https://<pod>:<port>/metrics):
// every request carries Token as its bearer; the operator's self-signed metrics certificate is
// not verified (the token grants nothing but reading /metrics). dial, when not nil, opens
// every connection, e.g. through the cluster provider.
func (m *Reader) Client(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &bearerTransport{reader: m, next: &http.Transport{
		DialContext:     dial,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // self-signed; see above
	}}}
}

type bearerTransport struct {
	reader *Reader
	next   http.RoundTripper
}

func (b *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	token, err := b.reader.Token(req.Context())
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+token)
	return b.next.RoundTrip(req)
}

// Port is the number of the pod's container port named "metrics" (the chart's 8443).
func Port(p *corev1.Pod) (int32, error) {
	port, found := release.ContainerPort(p, "metrics")
	if !found {
		return 0, fmt.Errorf("pod %s/%s has no container port named metrics", p.Namespace, p.Name)
	}
	return port, nil
}

// ScrapePod GETs https://<pod IP>:<port>/metrics with the reader's token, over connections dial
// opens (however the provider reaches pods), and returns its samples.
func (m *Reader) ScrapePod(ctx context.Context, p *corev1.Pod, port int32, dial func(ctx context.Context) (net.Conn, error)) (Samples, error) {
	client := m.Client(func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) })
	defer client.CloseIdleConnections()
	url := "https://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port))) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }() // read to the end
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d: %.200s", url, resp.StatusCode, body)
	}
	samples, err := ParseSamples(body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return samples, nil
}

// PodScrape is one pod's answer to ScrapeReadyOperators: its samples, or why it gave none.
type PodScrape struct {
	Pod     string // namespace/name
	Samples Samples
	Err     error
}

// ScrapeReadyOperators scrapes /metrics of every ready operator pod of the reader's release that
// is not being deleted (ScrapePod, over connections dial opens to the pod). The error is for the
// pods that could not be listed or have no metrics port; a failed scrape is its pod's Err.
func (m *Reader) ScrapeReadyOperators(ctx context.Context, dial func(ctx context.Context, p *corev1.Pod, port int32) (net.Conn, error)) ([]PodScrape, error) {
	pods, err := release.OperatorPods(ctx, m.kube, m.rel)
	if err != nil {
		return nil, err
	}
	var out []PodScrape
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || !release.PodReady(p) {
			continue
		}
		port, err := Port(p)
		if err != nil {
			return nil, err
		}
		samples, err := m.ScrapePod(ctx, p, port, func(ctx context.Context) (net.Conn, error) { return dial(ctx, p, port) })
		out = append(out, PodScrape{Pod: p.Namespace + "/" + p.Name, Samples: samples, Err: err})
	}
	return out, nil
}

// Sample is one counter, gauge or untyped sample of a Prometheus exposition.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples are the samples of one scrape.
type Samples []Sample

// ParseSamples reads a Prometheus text exposition.
func ParseSamples(raw []byte) (Samples, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the metrics: %w", err)
	}
	var out Samples
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			s := Sample{Name: name, Labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				s.Value = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				s.Value = m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				s.Value = m.GetUntyped().GetValue()
			default:
				continue
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// Sum adds up the samples of name whose labels include match.
func (s Samples) Sum(name string, match map[string]string) float64 {
	var total float64
	for _, sample := range s {
		if sample.Name == name && labelsInclude(sample.Labels, match) {
			total += sample.Value
		}
	}
	return total
}

// Value is the value of name's first sample (an unlabelled gauge has one), and whether there is one.
func (s Samples) Value(name string) (float64, bool) {
	for _, sample := range s {
		if sample.Name == name {
			return sample.Value, true
		}
	}
	return 0, false
}

func labelsInclude(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}
