// Package certmanager installs cert-manager's CRDs (from the module's deploy/crds, the version
// in the workspace's build list) and checks that cert-manager works on a cluster. The
// controllers themselves run from package certmanager/controllers.
package certmanager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	cmv1client "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/typed/certmanager/v1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// Module is the Go module whose packages, CRDs and chart gauntlet uses.
const Module = "github.com/cert-manager/cert-manager"

// CRDDir locates deploy/crds of the cert-manager module in the workspace's build list, so the
// CRDs always match the controller code compiled into gauntlet-cert-manager. workspaceRoot is
// the directory `go list` runs in.
func CRDDir(ctx context.Context, workspaceRoot string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", Module)
	cmd.Dir = workspaceRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w: %s", Module, err, stderr.String())
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("locating cert-manager CRDs: %w (module not downloaded? run `go mod download %s`)", err, Module)
	}
	return dir, nil
}

// InstallCRDs creates or updates every CRD in dir and waits until each is Established.
func InstallCRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	if len(files) == 0 {
		return fmt.Errorf("installing cert-manager CRDs: no *.yaml in %s", dir)
	}
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	var names []string
	for _, f := range files {
		objs, err := readCRDs(f)
		if err != nil {
			return err
		}
		for _, crd := range objs {
			names = append(names, crd.Name)
			existing, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				_, err = crds.Create(ctx, crd, metav1.CreateOptions{})
			case err == nil:
				crd.ResourceVersion = existing.ResourceVersion
				_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
			}
			if err != nil {
				return fmt.Errorf("installing CustomResourceDefinition %s from %s: %w", crd.Name, f, err)
			}
		}
	}
	for _, name := range names {
		err := poll.Until(ctx, "CustomResourceDefinition "+name+" to be Established", 30*time.Second, func(ctx context.Context) (bool, string, error) {
			crd, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established {
					return c.Status == apiextensionsv1.ConditionTrue, fmt.Sprintf("Established=%s (%s: %s)", c.Status, c.Reason, c.Message), nil
				}
			}
			return false, "no Established condition yet", nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func readCRDs(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	f, err := os.Open(path) //nolint:gosec // G304: a CRD manifest of the cert-manager module in the module cache
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := dec.Decode(&crd); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		out = append(out, &crd)
	}
}

// ProbeIssuer is the self-signed Issuer WaitReady creates: cert-manager is working once its
// issuers controller has marked it Ready.
const ProbeIssuer = "gauntlet-readiness-probe"

// WaitReady creates the namespace and a self-signed probe Issuer in it and waits until the
// running controllers mark the Issuer Ready.
func WaitReady(ctx context.Context, cfg *rest.Config, namespace string, timeout time.Duration) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cm, err := cmclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Namespace %s: %w", namespace, err)
	}
	issuer := &cmv1.Issuer{
		ObjectMeta: metav1.ObjectMeta{Name: ProbeIssuer, Namespace: namespace},
		Spec:       cmv1.IssuerSpec{IssuerConfig: cmv1.IssuerConfig{SelfSigned: &cmv1.SelfSignedIssuer{}}},
	}
	if _, err := cm.CertmanagerV1().Issuers(namespace).Create(ctx, issuer, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Issuer %s/%s: %w", namespace, ProbeIssuer, err)
	}
	return WaitObjectReady(ctx, cfg, cmv1.IssuerKind, namespace, ProbeIssuer, timeout)
}

// WaitObjectReady waits until cert-manager marks an object Ready: kind is cmv1.IssuerKind,
// cmv1.ClusterIssuerKind or cmv1.CertificateKind (namespace is not used for a ClusterIssuer).
// A timeout quotes the Ready condition last seen.
func WaitObjectReady(ctx context.Context, cfg *rest.Config, kind, namespace, name string, timeout time.Duration) error {
	what := fmt.Sprintf("%s %s/%s to be Ready", kind, namespace, name)
	switch kind {
	case cmv1.IssuerKind, cmv1.CertificateKind:
	case cmv1.ClusterIssuerKind:
		what = fmt.Sprintf("%s %s to be Ready", kind, name)
	default:
		return fmt.Errorf("waiting for %s: %s is not a cert-manager kind with a Ready condition", what, kind)
	}
	cm, err := cmclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a cert-manager client: %w", err)
	}
	return poll.Until(ctx, what, timeout, func(ctx context.Context) (bool, string, error) {
		c, err := readyCondition(ctx, cm.CertmanagerV1(), kind, namespace, name)
		if err != nil {
			return false, err.Error(), nil
		}
		if c == nil {
			return false, "no Ready condition yet", nil
		}
		return c.status == cmmeta.ConditionTrue, fmt.Sprintf("Ready=%s (%s: %s)", c.status, c.reason, c.message), nil
	})
}

// condition is what waits quote of a status condition; Issuers and Certificates have
// condition types of their own.
type condition struct {
	status          cmmeta.ConditionStatus
	reason, message string
}

// readyCondition reads the Ready condition of an Issuer, a ClusterIssuer or a Certificate; nil
// when there is none yet.
func readyCondition(ctx context.Context, cm cmv1client.CertmanagerV1Interface, kind, namespace, name string) (*condition, error) {
	var issuer cmv1.GenericIssuer
	switch kind {
	case cmv1.CertificateKind:
		crt, err := cm.Certificates(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		for _, c := range crt.Status.Conditions {
			if c.Type == cmv1.CertificateConditionReady {
				return &condition{c.Status, c.Reason, c.Message}, nil
			}
		}
		return nil, nil
	case cmv1.ClusterIssuerKind:
		got, err := cm.ClusterIssuers().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		issuer = got
	default:
		got, err := cm.Issuers(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		issuer = got
	}
	for _, c := range issuer.GetStatus().Conditions {
		if c.Type == cmv1.IssuerConditionReady {
			return &condition{c.Status, c.Reason, c.Message}, nil
		}
	}
	return nil, nil
}

// DeleteProbe deletes the probe Issuer WaitReady created in namespace.
func DeleteProbe(ctx context.Context, cfg *rest.Config, namespace string) error {
	cm, err := cmclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	err = cm.CertmanagerV1().Issuers(namespace).Delete(ctx, ProbeIssuer, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Issuer %s/%s: %w", namespace, ProbeIssuer, err)
	}
	return nil
}
