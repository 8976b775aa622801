package suite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	certutil "k8s.io/client-go/util/cert"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
)

// Artifacts of a failed scenario, written to <suite output>/artifacts/<scenario ID>/ so a red
// run can be understood without running it again:
//
//	pods.txt                   every pod's phase, readiness and container states
//	logs/<ns>_<pod>_<c>.log    operator and cert-manager container logs (and .previous.log)
//	events.txt                 every event, oldest first
//	webhookconfigurations.yaml validating and mutating webhook configurations
//	cabundles.txt              the certificates in each caBundle (subject, SANs, validity, serial)
//	crd-conversion.yaml        the Dynamo CRDs' conversion settings
//	secrets.txt                Secret metadata, key names and sizes, certificate details — never key material
//	cert-manager.yaml          Issuers, ClusterIssuers, Certificates, CertificateRequests (status included)
//
// The provider's own logs (control plane, node agent, cert-manager processes) go once per
// suite to artifacts/cluster/; on a provider whose exported logs lose deleted pods' (kind,
// existing), artifacts/cluster/pod-logs/ holds every container run of the operator's,
// cert-manager's and the target's pods, recorded while the suite ran (PodLogsDir).

// logSelector picks the pods whose logs explain webhook and certificate failures: the
// operator's and cert-manager's (when it runs as pods).
const logSelector = "app.kubernetes.io/name in (dynamo-operator,cert-manager,cainjector,webhook)"

// collectArtifacts writes the artifacts above into dir. Every part is attempted; the error
// joins the parts that failed.
// Artifacts are for the user who ran the suite: 0750 directories, 0600 files.
func collectArtifacts(ctx context.Context, c *Cluster, dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	parts := []struct {
		name string
		fn   func(context.Context, *Cluster, string) error
	}{
		{"pods", dumpPods},
		{"logs", dumpLogs},
		{"events", dumpEvents},
		{"webhook configurations", dumpWebhookConfigurations},
		{"CRD conversion", dumpCRDConversion},
		{"secrets", dumpSecrets},
		{"cert-manager objects", dumpCertManager},
	}
	var errs []error
	for _, p := range parts {
		if err := p.fn(ctx, c, dir); err != nil {
			errs = append(errs, fmt.Errorf("collecting %s: %w", p.name, err))
		}
	}
	return errors.Join(errs...)
}

func dumpPods(ctx context.Context, c *Cluster, dir string) error {
	pods, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var b bytes.Buffer
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "%s/%s\n", p.Namespace, release.PodState(&p))
	}
	return os.WriteFile(filepath.Join(dir, "pods.txt"), b.Bytes(), 0o600)
}

func dumpLogs(ctx context.Context, c *Cluster, dir string) error {
	pods, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: logSelector})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			base := filepath.Join(dir, "logs", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, cs.Name))
			errs = append(errs, writeLog(ctx, c, &p, cs.Name, false, base+".log"))
			if cs.RestartCount > 0 {
				errs = append(errs, writeLog(ctx, c, &p, cs.Name, true, base+".previous.log"))
			}
		}
	}
	return errors.Join(errs...)
}

func writeLog(ctx context.Context, c *Cluster, p *corev1.Pod, container string, previous bool, path string) error {
	return saveLog(ctx, c.kube, p.Namespace, p.Name, &corev1.PodLogOptions{Container: container, Previous: previous}, path)
}

// saveLog copies the log the API server streams for pod ns/name (opts) into path, to the
// stream's end: a log as it is, or, with opts.Follow, as it is written until the container ends.
func saveLog(ctx context.Context, kube kubernetes.Interface, ns, name string, opts *corev1.PodLogOptions, path string) error {
	rc, err := kube.CoreV1().Pods(ns).GetLogs(name, opts).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of %s/%s container %s: %w", ns, name, opts.Container, err)
	}
	defer func() { _ = rc.Close() }() // a log stream, copied to its end or to the copy's error
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600) //nolint:gosec // G304: a log file in the suite's artifacts dir
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		_ = f.Close() // the copy's error is the one to report
		return fmt.Errorf("logs of %s/%s container %s: %w", ns, name, opts.Container, err)
	}
	return f.Close()
}

func dumpEvents(ctx context.Context, c *Cluster, dir string) error {
	events, err := c.kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	items := events.Items
	sort.SliceStable(items, func(i, j int) bool { return eventTime(&items[i]).Before(eventTime(&items[j])) })
	var b bytes.Buffer
	for _, e := range items {
		fmt.Fprintf(&b, "%s %-7s %-24s %s/%s %s: %s (x%d)\n", eventTime(&e).UTC().Format("15:04:05.000"), e.Type, e.Reason,
			e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.InvolvedObject.Kind, strings.TrimSpace(e.Message), max(e.Count, 1))
	}
	return os.WriteFile(filepath.Join(dir, "events.txt"), b.Bytes(), 0o600)
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func dumpWebhookConfigurations(ctx context.Context, c *Cluster, dir string) error {
	vwcs, err := c.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	mwcs, err := c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var docs [][]byte
	var bundles bytes.Buffer
	for i := range vwcs.Items {
		w := &vwcs.Items[i]
		w.ManagedFields = nil
		w.Kind, w.APIVersion = "ValidatingWebhookConfiguration", "admissionregistration.k8s.io/v1"
		docs = append(docs, mustYAML(w))
		for _, h := range w.Webhooks {
			describeBundle(&bundles, "ValidatingWebhookConfiguration "+w.Name+" webhook "+h.Name, h.ClientConfig.CABundle)
		}
	}
	for i := range mwcs.Items {
		w := &mwcs.Items[i]
		w.ManagedFields = nil
		w.Kind, w.APIVersion = "MutatingWebhookConfiguration", "admissionregistration.k8s.io/v1"
		docs = append(docs, mustYAML(w))
		for _, h := range w.Webhooks {
			describeBundle(&bundles, "MutatingWebhookConfiguration "+w.Name+" webhook "+h.Name, h.ClientConfig.CABundle)
		}
	}
	crds, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, crd := range crds.Items {
			if conv := crd.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
				describeBundle(&bundles, "CustomResourceDefinition "+crd.Name+" conversion", conv.Webhook.ClientConfig.CABundle)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "webhookconfigurations.yaml"), bytes.Join(docs, []byte("---\n")), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cabundles.txt"), bundles.Bytes(), 0o600)
}

func describeBundle(w *bytes.Buffer, place string, bundle []byte) {
	fmt.Fprintf(w, "%s:\n", place)
	if len(bundle) == 0 {
		fmt.Fprintln(w, "  (empty)")
		return
	}
	certs, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		fmt.Fprintf(w, "  (%d bytes, unparseable: %v)\n", len(bundle), err)
		return
	}
	for _, cert := range certs {
		fmt.Fprintf(w, "  %s\n", pki.Describe(cert))
	}
}

func dumpCRDConversion(ctx context.Context, c *Cluster, dir string) error {
	crds, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	type view struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations,omitempty"`
		Conversion  any               `json:"conversion"`
		Versions    []string          `json:"versions"`
	}
	var docs [][]byte
	for _, crd := range crds.Items {
		if crd.Spec.Group != dynamo.Group {
			continue
		}
		v := view{Name: crd.Name, Annotations: crd.Annotations, Conversion: crd.Spec.Conversion}
		for _, ver := range crd.Spec.Versions {
			v.Versions = append(v.Versions, fmt.Sprintf("%s served=%t storage=%t", ver.Name, ver.Served, ver.Storage))
		}
		docs = append(docs, mustYAML(v))
	}
	return os.WriteFile(filepath.Join(dir, "crd-conversion.yaml"), bytes.Join(docs, []byte("---\n")), 0o600)
}

// certificateKeys are Secret keys holding certificates (never private keys).
var certificateKeys = []string{"tls.crt", "ca.crt", "tls.cert"}

func dumpSecrets(ctx context.Context, c *Cluster, dir string) error {
	secrets, err := c.kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var b bytes.Buffer
	for _, s := range secrets.Items {
		hasCert := s.Type == corev1.SecretTypeTLS
		for _, k := range certificateKeys {
			if _, ok := s.Data[k]; ok {
				hasCert = true
			}
		}
		if !hasCert {
			continue
		}
		fmt.Fprintf(&b, "Secret %s/%s type %s created %s resourceVersion %s\n", s.Namespace, s.Name, s.Type,
			s.CreationTimestamp.UTC().Format("15:04:05"), s.ResourceVersion)
		if len(s.Labels) > 0 {
			fmt.Fprintf(&b, "  labels: %v\n", s.Labels)
		}
		if ann := safeAnnotations(s.Annotations); len(ann) > 0 {
			fmt.Fprintf(&b, "  annotations: %v\n", ann)
		}
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s: %d bytes\n", k, len(s.Data[k]))
			if !slices.Contains(certificateKeys, k) {
				continue // key material and anything unknown: size only
			}
			certs, err := certutil.ParseCertsPEM(s.Data[k])
			if err != nil {
				fmt.Fprintf(&b, "    (unparseable: %v)\n", err)
				continue
			}
			for _, cert := range certs {
				fmt.Fprintf(&b, "    %s\n", pki.Describe(cert))
			}
		}
	}
	return os.WriteFile(filepath.Join(dir, "secrets.txt"), b.Bytes(), 0o600)
}

// safeAnnotations drops kubectl's last-applied-configuration, which would repeat the data.
func safeAnnotations(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if k != corev1.LastAppliedConfigAnnotation {
			out[k] = v
		}
	}
	return out
}

var certManagerResources = []schema.GroupVersionResource{
	{Group: "cert-manager.io", Version: "v1", Resource: "clusterissuers"},
	{Group: "cert-manager.io", Version: "v1", Resource: "issuers"},
	{Group: "cert-manager.io", Version: "v1", Resource: "certificates"},
	{Group: "cert-manager.io", Version: "v1", Resource: "certificaterequests"},
}

func dumpCertManager(ctx context.Context, c *Cluster, dir string) error {
	var docs [][]byte
	for _, gvr := range certManagerResources {
		list, err := c.dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return nil // no cert-manager on this cluster
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
			// CertificateRequests carry the CSR; public, but noise.
			unstructured.RemoveNestedField(obj.Object, "spec", "request")
			docs = append(docs, mustYAML(obj.Object))
		}
	}
	return os.WriteFile(filepath.Join(dir, "cert-manager.yaml"), bytes.Join(docs, []byte("---\n")), 0o600)
}

func mustYAML(v any) []byte {
	out, err := yaml.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf("# encoding failed: %v\n", err))
	}
	return out
}
