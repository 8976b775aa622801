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
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
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
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CustomResourceDefinition %s to be Established: %w", name, err)
		}
	}
	return nil
}

func readCRDs(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
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
	var last string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := cm.CertmanagerV1().Issuers(namespace).Get(ctx, ProbeIssuer, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == cmv1.IssuerConditionReady {
				last = fmt.Sprintf("Ready=%s (%s: %s)", c.Status, c.Reason, c.Message)
				return c.Status == cmmeta.ConditionTrue, nil
			}
		}
		last = "no Ready condition yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Issuer %s/%s to become Ready (%s): %w", namespace, ProbeIssuer, last, err)
	}
	return nil
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
