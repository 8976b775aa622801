package doctor

import (
	"context"
	"crypto/x509"
	"fmt"
	"regexp"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// The webhooks the dry-run objects must pass through: the validating one denies the invalid
// object, the mutating one stamps the valid one.
const (
	dryRunWebhook         = "vdynamographdeployment.nvidia.com"
	dryRunMutatingWebhook = "mdynamographdeployment.nvidia.com"
)

// dryRunGraph is the object the dry-runs create: valid as is, invalid (no services, which only
// the webhook rejects — the CRD schema admits it) when valid is false.
func dryRunGraph(namespace string, valid bool) *v1alpha1.DynamoGraphDeployment {
	g := &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "dynamo-doctor-", Namespace: namespace},
		Spec:       v1alpha1.DynamoGraphDeploymentSpec{BackendFramework: "vllm"},
	}
	if valid {
		g.Spec.Services = map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"frontend": {Replicas: ptr.To[int32](1)}}
	}
	return g
}

// checkDryRun dry-runs a valid and an invalid DynamoGraphDeployment through the API server, as
// cert-manager's cmapichecker does: the valid one must be admitted and stamped by the mutating
// webhook, the invalid one denied by the validating webhook. A failed webhook call is
// classified by its error text.
func checkDryRun(ctx context.Context, s *session) outcome {
	tns := s.testNamespace()
	title := fmt.Sprintf("server-side dry-run in namespace %s: a valid DynamoGraphDeployment is admitted, an invalid one is denied by %s", tns, dryRunWebhook)

	good := dryRunGraph(tns, true)
	if err := s.client.Create(ctx, good, client.DryRunAll); err != nil {
		return failure(title, s.callFailure("the dry-run create of a valid DynamoGraphDeployment", err), "error: "+err.Error())
	}
	details := []string{fmt.Sprintf("valid DynamoGraphDeployment %s/%s admitted", tns, good.Name)}
	v := good.Annotations[v1alpha1.OperatorOriginVersionAnnotation]
	if v == "" {
		return failure(title, s.mutationNotRunning(ctx, tns), details...)
	}
	details = append(details, fmt.Sprintf("mutating webhook stamped %s=%s", v1alpha1.OperatorOriginVersionAnnotation, v))

	bad := dryRunGraph(tns, false)
	err := s.client.Create(ctx, bad, client.DryRunAll)
	if err == nil {
		return failure(title, s.notRunning(ctx, tns, false), append(details,
			fmt.Sprintf("invalid DynamoGraphDeployment %s/%s (no services) was admitted", tns, bad.Name))...)
	}
	if m := deniedBy.FindStringSubmatch(err.Error()); m != nil && m[1] == dryRunWebhook {
		return pass(title, append(details, "invalid DynamoGraphDeployment denied: "+shorten(err.Error(), 300))...)
	}
	return failure(title, s.callFailure("the dry-run create of an invalid DynamoGraphDeployment", err), append(details, "error: "+err.Error())...)
}

// mutationNotRunning explains a valid object admitted without the operator's stamp.
func (s *session) mutationNotRunning(ctx context.Context, tns string) cause {
	return s.notRunning(ctx, tns, true)
}

// notRunning explains why a webhook that should have judged (validating) or stamped
// (mutating) the dry-run object did not: its configuration is missing (T1 for validation),
// its namespaceSelector misses the namespace (T2), or it failed open (T7, failurePolicy
// Ignore with the operator down).
func (s *session) notRunning(ctx context.Context, tns string, mutating bool) cause {
	kind, name, webhook := "ValidatingWebhookConfiguration", s.validatingName, dryRunWebhook
	found := "an invalid DynamoGraphDeployment was admitted: validation is not running for namespace " + tns
	present := len(s.validating) > 0
	if mutating {
		kind, name, webhook = "MutatingWebhookConfiguration", s.mutatingName, dryRunMutatingWebhook
		found = fmt.Sprintf("a valid DynamoGraphDeployment was admitted without the %s annotation: the mutating webhook is not running for namespace %s",
			v1alpha1.OperatorOriginVersionAnnotation, tns)
		present = len(s.mutating) > 0
	}
	if !present {
		if mutating {
			return undocumented(fmt.Sprintf("%s (%s %s missing)", found, kind, name), s.fix.reinstall())
		}
		return documented(t1, fmt.Sprintf("%s (%s %s missing)", found, kind, name), s.fix.reinstall())
	}
	var ns corev1.Namespace
	nsErr := s.client.Get(ctx, client.ObjectKey{Name: tns}, &ns)
	for _, w := range s.webhooks() {
		if w.mutating != mutating || w.name != webhook {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(w.namespaceSelector); nsErr == nil && err == nil && !sel.Matches(labels.Set(ns.Labels)) {
			return documented(t2, fmt.Sprintf("%s (the namespaceSelector %q of webhook %s does not match it)", found, sel.String(), w.name),
				s.selectorFix(tns, w.namespaceSelector)...)
		}
		if w.failurePolicy == admissionregistrationv1.Ignore {
			return documented(t7, fmt.Sprintf("%s (webhook %s has failurePolicy Ignore, so a failed call admits the object)", found, w.name),
				s.fix.describePods(), s.fix.logs())
		}
		return undocumented(fmt.Sprintf("%s: webhook %s exists, selects the namespace and fails closed; is a namespace-restricted operator's Lease active in %s while that operator is down, or were the webhook's rules edited?",
			found, w.name, tns),
			fmt.Sprintf("kubectl -n %s get lease %s", tns, namespaceLockLease),
			fmt.Sprintf("kubectl get %s %s -o yaml", strings.ToLower(kind), name))
	}
	return undocumented(fmt.Sprintf("%s: %s %s has no webhook %s", found, kind, name, webhook), s.fix.reinstall())
}

// Error texts of failed webhook calls, as the API server words them (Go's net and x509
// errors), after cmapichecker's TranslateToSimpleError.
var (
	deniedBy         = regexp.MustCompile(`admission webhook "([^"]+)" denied the request`)
	failedCalling    = regexp.MustCompile(`failed calling webhook "([^"]+)"`)
	serviceNotFound  = regexp.MustCompile(`service "([^"]+)" not found`)
	noEndpoints      = regexp.MustCompile(`no endpoints available for service "([^"]+)"`)
	connRefused      = regexp.MustCompile(`connect: connection refused`)
	unknownAuthority = regexp.MustCompile(`x509: certificate signed by unknown authority`)
	expiredAuthority = regexp.MustCompile(`x509: certificate signed by unknown authority \(possibly because of "x509: certificate has expired or is not yet valid[^"]*" while trying to verify candidate authority certificate "([^"]*)"\)`)
	wrongSAN         = regexp.MustCompile(`x509: certificate is valid for .*, not \S+`)
	expired          = regexp.MustCompile(`x509: certificate has expired or is not yet valid`)
	expiredAt        = regexp.MustCompile(`x509: certificate has expired or is not yet valid: current time \S+ is after (\S+)`)
	// A webhook slow to complete its TLS handshake fails the call with the API server's
	// transport's own handshake timeout (10s) when that comes before timeoutSeconds.
	deadlineExceeded  = regexp.MustCompile(`context deadline exceeded|Client\.Timeout exceeded|i/o timeout|net/http: TLS handshake timeout`)
	forbiddenForUser  = regexp.MustCompile(`is forbidden: User "([^"]*)" cannot`)
	crdMissing        = regexp.MustCompile(`no matches for kind "DynamoGraphDeployment"|the server could not find the requested resource`)
	namespaceNotFound = regexp.MustCompile(`namespaces "([^"]+)" not found`)
)

// callFailure classifies the error of a dry-run create.
func (s *session) callFailure(action string, err error) cause {
	text := err.Error()
	webhook := "a webhook"
	if m := failedCalling.FindStringSubmatch(text); m != nil {
		webhook = "webhook " + m[1]
	}
	tns := s.testNamespace()
	switch {
	case deniedBy.MatchString(text):
		m := deniedBy.FindStringSubmatch(text)
		if s.isExaminedWebhook(m[1]) {
			return undocumented(fmt.Sprintf("%s was denied by this release's webhook %q: %s", action, m[1], shorten(text, 300)), s.fix.logs())
		}
		return undocumented(fmt.Sprintf("%s was denied by another admission webhook, %q: %s", action, m[1], shorten(text, 300)),
			"kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations")
	case serviceNotFound.MatchString(text):
		return documented(t8, fmt.Sprintf("%s failed: calling %s: %s", action, webhook, serviceNotFound.FindString(text)), s.fix.reinstall())
	case noEndpoints.MatchString(text), connRefused.MatchString(text):
		return documented(t6, fmt.Sprintf("%s failed: calling %s: connection refused", action, webhook),
			s.fix.describePods(), s.fix.logs())
	case expiredAuthority.MatchString(text):
		return undocumented(fmt.Sprintf("%s failed: calling %s: %s: the CA %q the caBundle holds is outside its validity; re-injecting it does not help, the CA and the serving certificate must be re-issued",
			action, webhook, shorten(expiredAuthority.FindString(text), 300), expiredAuthority.FindStringSubmatch(text)[1]), s.reissueCA()...)
	case unknownAuthority.MatchString(text):
		return documented(t3, fmt.Sprintf("%s failed: calling %s: x509: certificate signed by unknown authority", action, webhook), s.injectFix()...)
	case wrongSAN.MatchString(text):
		return documented(t4, fmt.Sprintf("%s failed: calling %s: %s", action, webhook, wrongSAN.FindString(text)), s.reissue()...)
	case expired.MatchString(text) && s.expiredBundleCA(text) != nil:
		ca := s.expiredBundleCA(text)
		return undocumented(fmt.Sprintf("%s failed: calling %s: %s: that is the NotAfter of CA %q in the caBundle, not of the serving certificate; re-injecting it does not help, the CA and the serving certificate must be re-issued",
			action, webhook, expiredAt.FindString(text), ca.Subject.CommonName), s.reissueCA()...)
	case expired.MatchString(text):
		return documented(t5, fmt.Sprintf("%s failed: calling %s: x509: certificate has expired or is not yet valid", action, webhook), s.reissue()...)
	case failedCalling.MatchString(text) && deadlineExceeded.MatchString(text) && !s.forRelease():
		return documented(t9, fmt.Sprintf("%s failed: calling %s: context deadline exceeded (slower than its timeoutSeconds)", action, webhook),
			s.fix.logs()+"   # why the webhook answers slowly",
			"# or raise the webhook's timeoutSeconds (at most 30) where the operator's installation sets it")
	case failedCalling.MatchString(text) && deadlineExceeded.MatchString(text):
		return documented(t9, fmt.Sprintf("%s failed: calling %s: context deadline exceeded (slower than its timeoutSeconds)", action, webhook),
			s.fix.logs()+" | grep duration   # how long each call took",
			fmt.Sprintf("kubectl -n %s get deployment %s -o jsonpath='{.spec.template.spec.containers[0].args}' | grep -o -- '--webhook-latency-injection=[^\"]*'   # test-only latency must be unset",
				s.opts.Namespace, s.deploymentName),
			s.fix.reinstall("--set webhook.timeoutSeconds=30")+"   # if the webhook is legitimately slow")
	case forbiddenForUser.MatchString(text):
		return undocumented(fmt.Sprintf("%s: the doctor's credentials may not create DynamoGraphDeployments in namespace %s", action, tns),
			fmt.Sprintf("kubectl auth can-i create dynamographdeployments.nvidia.com -n %s", tns))
	case crdMissing.MatchString(text):
		return undocumented(fmt.Sprintf("%s: the DynamoGraphDeployment CRD is not installed", action),
			s.fix.reinstall("--set crds.install=true"))
	case namespaceNotFound.MatchString(text):
		return undocumented(fmt.Sprintf("%s: namespace %s not found", action, tns), "kubectl create namespace "+tns)
	case failedCalling.MatchString(text):
		return undocumented(fmt.Sprintf("%s failed: calling %s: %s", action, webhook, shorten(text, 300)), s.fix.logs())
	}
	return undocumented(fmt.Sprintf("%s failed: %s", action, shorten(strings.TrimSpace(text), 300)), s.fix.logs())
}

// isExaminedWebhook reports whether name is a webhook of the configurations examined: a
// release's, or those with webhooks that call the examined Service.
func (s *session) isExaminedWebhook(name string) bool {
	for _, w := range s.webhooks() {
		if w.name == name {
			return true
		}
	}
	return false
}

// expiredBundleCA is the CA of a caBundle whose NotAfter is the one an "x509: certificate has
// expired" error names: Go reports a chain whose only candidate root expired that way, so the
// text alone would blame the serving certificate.
func (s *session) expiredBundleCA(text string) *x509.Certificate {
	m := expiredAt.FindStringSubmatch(text)
	if m == nil {
		return nil
	}
	at, err := time.Parse(time.RFC3339, m[1])
	if err != nil {
		return nil
	}
	for _, b := range s.bundles {
		for _, r := range b.roots {
			if r.NotAfter.Equal(at) {
				return r
			}
		}
	}
	return nil
}
