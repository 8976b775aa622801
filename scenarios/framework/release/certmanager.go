package release

import (
	"context"
	"fmt"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
)

// CAIssuer is a cert-manager CA issuer made for a scenario, to be named in a Release's IssuerRef.
type CAIssuer struct {
	Ref chart.IssuerRef
	// CAPEM is the issuer's CA certificate: what cainjector must put into every caBundle.
	CAPEM []byte
}

// CreateCAIssuer makes a CA issuer of ref's kind and name the way a platform team would: a
// self-signed issuer signs a CA Certificate, whose Secret backs a CA issuer. An Issuer lives in
// namespace; a ClusterIssuer's CA Secret lives in cert-manager's cluster resource namespace
// (clusterResourceNamespace). It waits until the issuer is Ready.
func CreateCAIssuer(ctx context.Context, cfg *rest.Config, ref chart.IssuerRef, namespace, clusterResourceNamespace string, timeout time.Duration) (*CAIssuer, error) {
	cm, err := cmclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building a cert-manager client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building a Kubernetes client: %w", err)
	}
	cluster := ref.Kind == cmv1.ClusterIssuerKind
	issuerKind, secretNS := cmv1.IssuerKind, namespace
	if cluster {
		issuerKind, secretNS = cmv1.ClusterIssuerKind, clusterResourceNamespace
	}
	if err := EnsureNamespace(ctx, kube, secretNS); err != nil {
		return nil, err
	}
	bootstrap, caName := ref.Name+"-selfsigned", ref.Name+"-ca"
	spec := func(c cmv1.IssuerConfig) cmv1.IssuerSpec { return cmv1.IssuerSpec{IssuerConfig: c} }
	if err := createIssuer(ctx, cm, cluster, namespace, bootstrap, spec(cmv1.IssuerConfig{SelfSigned: &cmv1.SelfSignedIssuer{}})); err != nil {
		return nil, err
	}
	caCert := &cmv1.Certificate{
		ObjectMeta: metav1.ObjectMeta{Name: caName, Namespace: secretNS},
		Spec: cmv1.CertificateSpec{
			IsCA:       true,
			CommonName: ref.Name + " CA",
			SecretName: caName,
			Duration:   &metav1.Duration{Duration: 10 * 365 * 24 * time.Hour},
			PrivateKey: &cmv1.CertificatePrivateKey{Algorithm: cmv1.ECDSAKeyAlgorithm, Size: 256},
			IssuerRef:  cmmeta.IssuerReference{Group: "cert-manager.io", Kind: ref.Kind, Name: bootstrap},
		},
	}
	if _, err := cm.CertmanagerV1().Certificates(secretNS).Create(ctx, caCert, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating Certificate %s/%s: %w", secretNS, caName, err)
	}
	if err := certmanager.WaitObjectReady(ctx, cfg, cmv1.CertificateKind, secretNS, caName, timeout); err != nil {
		return nil, err
	}
	if err := createIssuer(ctx, cm, cluster, namespace, ref.Name, spec(cmv1.IssuerConfig{CA: &cmv1.CAIssuer{SecretName: caName}})); err != nil {
		return nil, err
	}
	if err := certmanager.WaitObjectReady(ctx, cfg, issuerKind, namespace, ref.Name, timeout); err != nil {
		return nil, err
	}
	secret, err := kube.CoreV1().Secrets(secretNS).Get(ctx, caName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting CA Secret %s/%s: %w", secretNS, caName, err)
	}
	return &CAIssuer{Ref: ref, CAPEM: secret.Data["tls.crt"]}, nil
}

func createIssuer(ctx context.Context, cm cmclient.Interface, cluster bool, namespace, name string, spec cmv1.IssuerSpec) error {
	var err error
	if cluster {
		_, err = cm.CertmanagerV1().ClusterIssuers().Create(ctx, &cmv1.ClusterIssuer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterIssuer %s: %w", name, err)
		}
		return nil
	}
	_, err = cm.CertmanagerV1().Issuers(namespace).Create(ctx, &cmv1.Issuer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: spec}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Issuer %s/%s: %w", namespace, name, err)
	}
	return nil
}
