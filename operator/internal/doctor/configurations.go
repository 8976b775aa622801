package doctor

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"strings"

	certutil "k8s.io/client-go/util/cert"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/internal/certs"
)

// namespaceLockLease is the Lease a namespace-restricted operator holds in its namespace.
const namespaceLockLease = "dynamo-operator-ns-lock"

// webhookView is what the checks read of one validating or mutating webhook.
type webhookView struct {
	config            string // e.g. ValidatingWebhookConfiguration dynamo-validating
	name              string
	mutating          bool
	clientConfig      admissionregistrationv1.WebhookClientConfig
	namespaceSelector *metav1.LabelSelector
	objectSelector    *metav1.LabelSelector
	failurePolicy     admissionregistrationv1.FailurePolicyType
	timeoutSeconds    int32
	rules             []admissionregistrationv1.RuleWithOperations
	// matchConditions counts the webhook's CEL match conditions, which the doctor does not
	// evaluate.
	matchConditions int
}

// webhooks lists every webhook of the configurations found, validating first.
func (s *session) webhooks() []webhookView {
	var out []webhookView
	for _, c := range s.validating {
		for _, w := range c.Webhooks {
			out = append(out, webhookView{config: "ValidatingWebhookConfiguration " + c.Name, name: w.Name,
				clientConfig: w.ClientConfig, namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector,
				failurePolicy: policyOf(w.FailurePolicy), timeoutSeconds: timeoutOf(w.TimeoutSeconds),
				rules: w.Rules, matchConditions: len(w.MatchConditions)})
		}
	}
	for _, c := range s.mutating {
		for _, w := range c.Webhooks {
			out = append(out, webhookView{config: "MutatingWebhookConfiguration " + c.Name, name: w.Name, mutating: true,
				clientConfig: w.ClientConfig, namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector,
				failurePolicy: policyOf(w.FailurePolicy), timeoutSeconds: timeoutOf(w.TimeoutSeconds),
				rules: w.Rules, matchConditions: len(w.MatchConditions)})
		}
	}
	return out
}

// policyOf and timeoutOf apply the API's defaults.
func policyOf(p *admissionregistrationv1.FailurePolicyType) admissionregistrationv1.FailurePolicyType {
	if p == nil {
		return admissionregistrationv1.Fail
	}
	return *p
}

func timeoutOf(t *int32) int32 {
	if t == nil {
		return 10
	}
	return *t
}

// checkConfigurations finds the release's ValidatingWebhookConfiguration and
// MutatingWebhookConfiguration: the names from the Deployment's arguments, else the chart's
// names, else the namespace-restricted variants <release>-validating-<ns>.
func checkConfigurations(ctx context.Context, s *session) outcome {
	if !s.forRelease() {
		return s.configurationsCallingService(ctx)
	}
	if !s.namesFromArgs {
		if err := s.detectRestrictedNames(ctx); err != nil {
			return failure("webhook configurations exist", readError("listing ValidatingWebhookConfigurations", err))
		}
	}
	title := fmt.Sprintf("ValidatingWebhookConfiguration %s and MutatingWebhookConfiguration %s exist", s.validatingName, s.mutatingName)
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	vErr := s.client.Get(ctx, client.ObjectKey{Name: s.validatingName}, vwc)
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	mErr := s.client.Get(ctx, client.ObjectKey{Name: s.mutatingName}, mwc)
	for _, e := range []struct {
		err  error
		what string
	}{{vErr, "ValidatingWebhookConfiguration " + s.validatingName}, {mErr, "MutatingWebhookConfiguration " + s.mutatingName}} {
		if e.err != nil && !apierrors.IsNotFound(e.err) {
			return failure(title, readError("getting "+e.what, e.err))
		}
	}
	if vErr == nil {
		s.validating = append(s.validating, vwc)
	}
	if mErr == nil {
		s.mutating = append(s.mutating, mwc)
	}
	switch {
	case vErr != nil && mErr != nil:
		return failure(title, documented(t1,
			fmt.Sprintf("ValidatingWebhookConfiguration %s and MutatingWebhookConfiguration %s not found", s.validatingName, s.mutatingName),
			s.fix.reinstall()))
	case vErr != nil:
		return failure(title, documented(t1, fmt.Sprintf("ValidatingWebhookConfiguration %s not found", s.validatingName),
			s.fix.reinstall()))
	case mErr != nil:
		return failure(title, undocumented(
			fmt.Sprintf("MutatingWebhookConfiguration %s not found: new DynamoGraphDeployments are not stamped and DynamoGraphDeploymentRequests get no default image", s.mutatingName),
			s.fix.reinstall()))
	}
	if len(vwc.Webhooks) == 0 || len(mwc.Webhooks) == 0 {
		return failure(title, undocumented(
			fmt.Sprintf("%s has %d webhooks and %s has %d: the chart renders every webhook of files/webhook/manifests.yaml",
				vwc.Name, len(vwc.Webhooks), mwc.Name, len(mwc.Webhooks)),
			s.fix.reinstall()))
	}
	return pass(title, s.webhookDetails()...)
}

// webhookDetails is one line per webhook found: configuration, failurePolicy, timeoutSeconds.
func (s *session) webhookDetails() []string {
	var details []string
	for _, w := range s.webhooks() {
		details = append(details, fmt.Sprintf("%s: webhook %s, failurePolicy %s, timeoutSeconds %d", w.config, w.name, w.failurePolicy, w.timeoutSeconds))
	}
	return details
}

// configurationsCallingService finds, for any operator, every Validating- and
// MutatingWebhookConfiguration with a webhook that calls the Service, keeping only those
// webhooks; none is T1.
func (s *session) configurationsCallingService(ctx context.Context) outcome {
	svc := s.opts.Namespace + "/" + s.serviceName
	title := fmt.Sprintf("webhook configurations call Service %s", svc)
	var vwcs admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := s.client.List(ctx, &vwcs); err != nil {
		return failure(title, readError("listing ValidatingWebhookConfigurations", err))
	}
	var mwcs admissionregistrationv1.MutatingWebhookConfigurationList
	if err := s.client.List(ctx, &mwcs); err != nil {
		return failure(title, readError("listing MutatingWebhookConfigurations", err))
	}
	missing := s.missingConfigurations(vwcs.Items, mwcs.Items)
	for i := range vwcs.Items {
		c := &vwcs.Items[i]
		c.Webhooks = slices.DeleteFunc(c.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
			return !s.calls(w.ClientConfig)
		})
		if len(c.Webhooks) > 0 {
			s.validating = append(s.validating, c)
		}
	}
	for i := range mwcs.Items {
		c := &mwcs.Items[i]
		c.Webhooks = slices.DeleteFunc(c.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool {
			return !s.calls(w.ClientConfig)
		})
		if len(c.Webhooks) > 0 {
			s.mutating = append(s.mutating, c)
		}
	}
	if len(s.validating)+len(s.mutating) == 0 {
		return failure(title, documented(t1,
			fmt.Sprintf("no ValidatingWebhookConfiguration or MutatingWebhookConfiguration has a webhook that calls Service %s", svc),
			s.fix.reinstall(), "kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations"))
	}
	if len(missing) > 0 {
		return failure(title, documented(t1,
			fmt.Sprintf("no ValidatingWebhookConfiguration or MutatingWebhookConfiguration named %s, which the operator's installation makes (--configuration)", strings.Join(missing, ", ")),
			s.fix.reinstall(), "kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations"), s.webhookDetails()...)
	}
	return pass(title, s.webhookDetails()...)
}

// missingConfigurations are the configurations named for any operator that neither list holds.
func (s *session) missingConfigurations(vwcs []admissionregistrationv1.ValidatingWebhookConfiguration, mwcs []admissionregistrationv1.MutatingWebhookConfiguration) []string {
	found := map[string]bool{}
	for _, c := range vwcs {
		found[c.Name] = true
	}
	for _, c := range mwcs {
		found[c.Name] = true
	}
	var missing []string
	for _, name := range s.configurations {
		if !found[name] {
			missing = append(missing, name)
		}
	}
	return missing
}

// calls reports whether a webhook's clientConfig calls the examined Service.
func (s *session) calls(cc admissionregistrationv1.WebhookClientConfig) bool {
	return cc.Service != nil && cc.Service.Namespace == s.opts.Namespace && cc.Service.Name == s.serviceName
}

// detectRestrictedNames switches to <release>-validating-<ns> / <release>-mutating-<ns> when
// the cluster-wide names do not exist and exactly one restricted variant does.
func (s *session) detectRestrictedNames(ctx context.Context) error {
	err := s.client.Get(ctx, client.ObjectKey{Name: s.validatingName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	if err == nil || !apierrors.IsNotFound(err) {
		return client.IgnoreNotFound(err)
	}
	var list admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := s.client.List(ctx, &list); err != nil {
		return err
	}
	prefix := s.validatingName + "-"
	var found []string
	for _, c := range list.Items {
		if strings.HasPrefix(c.Name, prefix) {
			found = append(found, c.Name)
		}
	}
	if len(found) == 1 {
		ns := strings.TrimPrefix(found[0], prefix)
		s.validatingName = found[0]
		s.mutatingName = s.opts.Release + "-mutating-" + ns
		s.restrictedTo = ns
	}
	return nil
}

// trustBundle is one distinct caBundle and the webhooks that carry it.
type trustBundle struct {
	roots    []*x509.Certificate
	webhooks []string
}

// injectFix is how the caBundle gets (back) into the webhook configurations, by mode.
func (s *session) injectFix() []string {
	switch s.mode {
	case modeUnknown:
		return []string{
			"# the caBundle must hold the CA that signs the served certificate; whatever injects it (cert-manager's cainjector for configurations annotated cert-manager.io/inject-ca-from, the operator's own cert-controller, or you) has not:",
			`kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations -o custom-columns='NAME:.metadata.name,INJECT-CA-FROM:.metadata.annotations.cert-manager\.io/inject-ca-from'`,
			s.fix.rolloutRestart() + "   # operators that inject their own CA do so at startup",
		}
	case certs.ModeCertManager:
		return []string{
			fmt.Sprintf("kubectl get validatingwebhookconfiguration %s -o jsonpath='{.metadata.annotations.cert-manager\\.io/inject-ca-from}'   # must be %s/%s-serving-cert",
				s.validatingName, s.opts.Namespace, s.opts.Release),
			"kubectl -n cert-manager logs deployment/cert-manager-cainjector",
		}
	case certs.ModeExternal:
		return []string{s.fix.reinstall(`--set webhook.caBundle="$(base64 -w0 ca.crt)"`)}
	}
	return []string{s.fix.rolloutRestart() + "   # the operator re-injects the Secret's ca.crt at startup and every --cert-check-interval"}
}

// checkCABundle checks every webhook's caBundle: present, PEM certificates, and — when the
// Secret was usable — trusting the Secret's serving certificate.
func checkCABundle(ctx context.Context, s *session) outcome {
	title := "every webhook's caBundle is PEM and trusts the serving certificate"
	hooks := s.webhooks()
	if len(hooks) == 0 {
		return skip(title, "no webhook configuration to examine")
	}
	var empty, invalid []string
	var bundles []struct {
		pem []byte
		trustBundle
	}
outer:
	for _, w := range hooks {
		ca := w.clientConfig.CABundle
		if len(bytes.TrimSpace(ca)) == 0 {
			empty = append(empty, w.name)
			continue
		}
		roots, err := certutil.ParseCertsPEM(ca)
		if err != nil {
			invalid = append(invalid, fmt.Sprintf("%s (%v)", w.name, err))
			continue
		}
		for i := range bundles {
			if bytes.Equal(bundles[i].pem, ca) {
				bundles[i].webhooks = append(bundles[i].webhooks, w.name)
				continue outer
			}
		}
		bundles = append(bundles, struct {
			pem []byte
			trustBundle
		}{ca, trustBundle{roots: roots, webhooks: []string{w.name}}})
	}
	for _, b := range bundles {
		s.bundles = append(s.bundles, b.trustBundle)
	}
	switch {
	case len(empty) > 0:
		return failure(title, documented(t3, fmt.Sprintf("caBundle is empty in %s", s.webhookList(empty)), s.injectFix()...))
	case len(invalid) > 0:
		return failure(title, documented(t3, fmt.Sprintf("caBundle is not PEM in webhooks %s", strings.Join(invalid, ", ")), s.injectFix()...))
	}
	var details []string
	for _, b := range s.bundles {
		details = append(details, fmt.Sprintf("caBundle %s used by %s", describeRoots(b.roots), s.webhookList(b.webhooks)))
	}
	if s.secretChain == nil {
		return pass(title, append(details, "the Secret's certificate was not usable, so trust was not checked against it")...)
	}
	var untrusting []string
	var lastErr error
	now := s.opts.Now()
	for _, b := range s.bundles {
		err := verifyTrust(s.secretChain, b.roots, now)
		if err == nil {
			continue
		}
		if ca := expiredIssuer(issuerPath(s.secretChain, b.roots), now); ca != nil {
			return failure(title, s.expiredCACause("the caBundle of "+s.webhookList(b.webhooks), ca, now), details...)
		}
		untrusting = append(untrusting, b.webhooks...)
		lastErr = err
	}
	if len(untrusting) > 0 {
		return failure(title, documented(t3,
			fmt.Sprintf("the caBundle of %s is from another CA: it does not verify the certificate in Secret %s/%s (%v)",
				s.webhookList(untrusting), s.opts.Namespace, s.secretName, lastErr),
			s.injectFix()...), details...)
	}
	return pass(title, append(details, fmt.Sprintf("every caBundle verifies the certificate in Secret %s/%s", s.opts.Namespace, s.secretName))...)
}

func describeRoots(roots []*x509.Certificate) string {
	var names []string
	for _, r := range roots {
		names = append(names, fmt.Sprintf("%q (serial %s)", r.Subject.CommonName, r.SerialNumber.Text(16)))
	}
	return "[" + strings.Join(names, ", ") + "]"
}

// checkNamespaceSelector checks that every webhook's namespaceSelector selects the test
// namespace, by its labels.
func checkNamespaceSelector(ctx context.Context, s *session) outcome {
	tns := s.testNamespace()
	title := fmt.Sprintf("every webhook's namespaceSelector selects namespace %s", tns)
	var ns corev1.Namespace
	if err := s.client.Get(ctx, client.ObjectKey{Name: tns}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return failure(title, undocumented(fmt.Sprintf("test namespace %s not found", tns),
				"kubectl create namespace "+tns+"   # or pass --test-namespace=<an existing namespace>"))
		}
		return failure(title, readError("getting Namespace "+tns, err))
	}
	hooks := s.webhooks()
	if len(hooks) == 0 {
		return skip(title, "no webhook configuration to examine")
	}
	set := labels.Set(ns.Labels)
	var unmatched []string
	var selector *metav1.LabelSelector
	var details []string
	for _, w := range hooks {
		sel, err := metav1.LabelSelectorAsSelector(w.namespaceSelector)
		if err != nil {
			return failure(title, undocumented(fmt.Sprintf("webhook %s has an invalid namespaceSelector: %v", w.name, err), s.fix.reinstall()))
		}
		if !sel.Matches(set) {
			unmatched = append(unmatched, w.name)
			selector = w.namespaceSelector
			details = append(details, fmt.Sprintf("%s: namespaceSelector %q", w.name, sel.String()))
		}
		if w.objectSelector != nil && (len(w.objectSelector.MatchLabels) > 0 || len(w.objectSelector.MatchExpressions) > 0) {
			details = append(details, fmt.Sprintf("%s also has an objectSelector: only labelled objects are sent to it", w.name))
		}
	}
	details = append(details, fmt.Sprintf("namespace %s labels: %s", tns, labelsString(ns.Labels)))
	if s.forRelease() {
		details = append(details, s.leaseNote(ctx, tns)...)
	}
	if len(unmatched) == 0 {
		return pass(title, details...)
	}
	return failure(title, documented(t2,
		fmt.Sprintf("the namespaceSelector of %s does not match namespace %s", s.webhookList(unmatched), tns),
		s.selectorFix(tns, selector)...), details...)
}

// selectorFix labels the namespace to match selector's matchLabels, or resets the selector;
// a restricted release is pointed at its own namespace instead.
func (s *session) selectorFix(tns string, selector *metav1.LabelSelector) []string {
	if s.restrictedTo != "" && s.restrictedTo != tns {
		return []string{fmt.Sprintf("# release %s is namespace-restricted to %s; check that namespace, or the cluster-wide release, instead:", s.opts.Release, s.restrictedTo),
			fmt.Sprintf("kubectl dynamo doctor --release %s --namespace %s --test-namespace %s", s.opts.Release, s.opts.Namespace, s.restrictedTo)}
	}
	var out []string
	if selector != nil && len(selector.MatchLabels) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(selector.MatchLabels)) {
			kv = append(kv, k+"="+selector.MatchLabels[k])
		}
		out = append(out, fmt.Sprintf("kubectl label namespace %s %s --overwrite", tns, strings.Join(kv, " ")))
	}
	if !s.forRelease() {
		return append(out, "# or widen the webhook's namespaceSelector where the operator's installation sets it")
	}
	return append(out, s.fix.reinstall(`--set-json 'webhook.namespaceSelector={}'`)+"   # or select every namespace")
}

// leaseNote says when a namespace-restricted operator holds the test namespace: a
// cluster-wide release then skips it, and the dry-run is answered by the other operator.
func (s *session) leaseNote(ctx context.Context, tns string) []string {
	var lease coordinationv1.Lease
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: tns, Name: namespaceLockLease}, &lease); err != nil {
		return nil
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if s.restrictedTo == tns {
		return []string{fmt.Sprintf("Lease %s/%s held by %q (this release's lock)", tns, namespaceLockLease, holder)}
	}
	return []string{fmt.Sprintf("Lease %s/%s held by %q: a namespace-restricted operator serves %s and this release skips it while the Lease is active",
		tns, namespaceLockLease, holder, tns)}
}

func labelsString(l map[string]string) string {
	if len(l) == 0 {
		return "(none)"
	}
	return labels.Set(l).String()
}

// webhookList names webhooks for a message: "all 6 webhooks" when that is every webhook of
// the release's configurations, else "webhooks a, b".
func (s *session) webhookList(names []string) string {
	if all := len(s.webhooks()); all > 1 && len(names) == all {
		return fmt.Sprintf("all %d webhooks", all)
	}
	if len(names) == 1 {
		return "webhook " + names[0]
	}
	return "webhooks " + strings.Join(names, ", ")
}
