package certmanager

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiutil "github.com/cert-manager/cert-manager/pkg/api/util"
	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// renewRetry outlasts cert-manager's own status writes right after an issuance (scenarios
// trigger renewals back to back): client-go's DefaultRetry gives up after five tries in 50 ms.
var renewRetry = wait.Backoff{Steps: 20, Duration: 50 * time.Millisecond, Factor: 1.5, Cap: 2 * time.Second}

// Renew does what `cmctl renew` does to Certificate namespace/name: it sets the Issuing
// condition, and cert-manager issues a new certificate at once. by names who asked, in the
// condition's message. cert-manager writes the Certificate's status too, so the update is
// retried on a conflict. A renewal asked for while an issuance is in progress is lost (WaitIssued).
func Renew(ctx context.Context, cfg *rest.Config, namespace, name, by string) error {
	cm, err := cmclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a cert-manager client: %w", err)
	}
	certs := cm.CertmanagerV1().Certificates(namespace)
	err = retry.RetryOnConflict(renewRetry, func() error {
		crt, err := certs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		apiutil.SetCertificateCondition(crt, crt.Generation, cmv1.CertificateConditionIssuing, cmmeta.ConditionTrue, "ManuallyTriggered", "Certificate re-issuance manually triggered by "+by)
		_, err = certs.UpdateStatus(ctx, crt, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting condition Issuing=True on Certificate %s/%s: %w", namespace, name, err)
	}
	return nil
}

// WaitIssued waits until cert-manager has finished an issuance of Certificate namespace/name:
// it is Ready, not Issuing, at a revision above after. It returns that revision. A renewal
// triggered before that would be lost: cert-manager clears the Issuing condition when the
// issuance in progress ends.
func WaitIssued(ctx context.Context, cfg *rest.Config, namespace, name string, after int, timeout time.Duration) (int, error) {
	cm, err := cmclient.NewForConfig(cfg)
	if err != nil {
		return 0, fmt.Errorf("building a cert-manager client: %w", err)
	}
	certs := cm.CertmanagerV1().Certificates(namespace)
	revision := 0
	what := fmt.Sprintf("Certificate %s/%s to be Ready and not Issuing at a revision above %d", namespace, name, after)
	err = poll.Until(ctx, what, timeout, func(ctx context.Context) (bool, string, error) {
		crt, err := certs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if crt.Status.Revision != nil {
			revision = *crt.Status.Revision
		}
		ready := apiutil.CertificateHasCondition(crt, cmv1.CertificateCondition{Type: cmv1.CertificateConditionReady, Status: cmmeta.ConditionTrue})
		issuing := apiutil.CertificateHasCondition(crt, cmv1.CertificateCondition{Type: cmv1.CertificateConditionIssuing, Status: cmmeta.ConditionTrue})
		return ready && !issuing && revision > after, fmt.Sprintf("revision %d, %s, issuing %t", revision, ReadyState(crt), issuing), nil
	})
	return revision, err
}

// ReadyState quotes a Certificate's Ready condition: "Ready=True (Ready: …)".
func ReadyState(crt *cmv1.Certificate) string {
	for _, cond := range crt.Status.Conditions {
		if cond.Type == cmv1.CertificateConditionReady {
			return fmt.Sprintf("Ready=%s (%s: %s)", cond.Status, cond.Reason, cond.Message)
		}
	}
	return "no Ready condition"
}

// CertificateFor is the name of the Certificate in namespace that issues Secret secret (its
// spec.secretName): what a chart's cert-manager mode renders, or a user's setup made.
func CertificateFor(ctx context.Context, cfg *rest.Config, namespace, secret string) (string, error) {
	cm, err := cmclient.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("building a cert-manager client: %w", err)
	}
	list, err := cm.CertmanagerV1().Certificates(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing the Certificates of namespace %s: %w", namespace, err)
	}
	var others []string
	for _, crt := range list.Items {
		if crt.Spec.SecretName == secret {
			return crt.Name, nil
		}
		others = append(others, fmt.Sprintf("%s (Secret %s)", crt.Name, crt.Spec.SecretName))
	}
	return "", fmt.Errorf("no Certificate in namespace %s issues Secret %s (Certificates there: %s)", namespace, secret, orNone(others))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
