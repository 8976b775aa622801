package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WebhookOptions say which webhooks of any operator to examine (kubectl webhook-doctor): the
// ones that call one Service.
type WebhookOptions struct {
	// Namespace is the webhook Service's namespace.
	Namespace string
	// Service is the webhook Service. Empty: the one Service in Namespace that webhook
	// configurations or CRD conversion webhooks call (several or none is an error).
	Service string
	// Secret holds the serving certificate. Empty: the one Secret the serving container (the
	// container of the Service's Deployment whose port is the Service's targetPort) mounts;
	// with none or several the certificate-secret check has nothing to examine.
	Secret string
	// Configurations are the Validating- and MutatingWebhookConfigurations the operator's
	// installation makes. One of them not found is T1: without the names, the doctor sees only
	// the configurations that exist, and one deleted beside another that still calls the
	// Service goes unnoticed.
	Configurations []string
	// TestNamespace is where the namespaceSelector match and the dry-runs are checked
	// (default "default").
	TestNamespace string
	// DialTimeout bounds each TCP connect to the webhook (default 5s), and its TLS handshake
	// when no webhook that trusts the caBundle has a timeoutSeconds (which bounds it otherwise).
	DialTimeout time.Duration
	// Now is the clock certificates are judged by (default time.Now).
	Now func() time.Time
	// Connect says how the served-certificate check reaches the webhook (default ConnectAuto).
	Connect Connect
}

// DefaultTestNamespace is WebhookOptions.TestNamespace when it is empty.
const DefaultTestNamespace = "default"

func (o WebhookOptions) validate() error {
	if o.Namespace == "" {
		return errors.New("webhook doctor options: namespace must be set (the webhook Service's namespace)")
	}
	if o.Connect != "" {
		if _, err := ParseConnect(string(o.Connect)); err != nil {
			return fmt.Errorf("webhook doctor options: %w", err)
		}
	}
	return nil
}

// WebhookDoctor examines any operator's webhooks, found by the Service they call. It runs the
// checks a release gets except gauntlet's extras (see releaseExtras), with a dry-run that asks
// only whether the API server reaches each webhook.
type WebhookDoctor struct {
	d    *Doctor
	opts WebhookOptions
}

// NewWebhookDoctor returns a WebhookDoctor that reaches the cluster through cfg.
func NewWebhookDoctor(cfg *rest.Config, opts WebhookOptions) (*WebhookDoctor, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	tns := opts.TestNamespace
	if tns == "" {
		tns = DefaultTestNamespace
	}
	d, err := newDoctor(cfg, Options{Namespace: opts.Namespace, TestNamespace: tns, DialTimeout: opts.DialTimeout, Now: opts.Now, Connect: opts.Connect})
	if err != nil {
		return nil, err
	}
	return &WebhookDoctor{d: d, opts: opts}, nil
}

// Run checks the API server, then names what the options leave out and runs the other
// checks. With the API server unreachable it returns the report of that root cause (every
// other check skipped), as a release's doctor does. The error is for names it cannot settle
// (no Service, several, or the objects unreadable): the caller's to fix, not the cluster's.
func (w *WebhookDoctor) Run(ctx context.Context) (Report, error) {
	checks := webhookChecks()
	s := w.d.newSession(facts{mode: modeUnknown, fix: fixes{namespace: w.opts.Namespace}})
	report := s.runChecks(ctx, checks[:1])
	if report.Healthy() {
		if err := s.resolve(ctx, w.opts); err != nil {
			return nil, err
		}
	}
	return append(report, s.runChecks(ctx, checks[1:])...), nil
}

// releaseExtras are the checks only a release of gauntlet's operator gets: they read its
// Deployment's arguments, its cert-controller's RBAC and its documented log lines.
var releaseExtras = []string{CheckDeployment, CheckRBAC, CheckLogs}

// webhookChecks is the checklist for any operator: allChecks without releaseExtras (nor them
// upstream of any check), its dry-run the one that asks whether the API server reaches each
// webhook.
func webhookChecks() []check {
	outside := func(id string) bool { return slices.Contains(releaseExtras, id) }
	var out []check
	for _, c := range allChecks() {
		if outside(c.id) {
			continue
		}
		c.needs = slices.DeleteFunc(slices.Clone(c.needs), outside)
		c.after = slices.DeleteFunc(slices.Clone(c.after), outside)
		if c.id == CheckDryRun {
			c.title, c.run = reachTitle, checkWebhooksReached
		}
		out = append(out, c)
	}
	return out
}

// serviceCaller is a webhook that calls a Service: who it is, for messages, and the Service
// port it calls.
type serviceCaller struct {
	who  string
	port int32
}

// serviceCallers lists, by Service name, the webhooks (validating, mutating, CRD conversion)
// that call a Service in namespace.
func serviceCallers(ctx context.Context, c client.Client, namespace string) (map[string][]serviceCaller, error) {
	out := map[string][]serviceCaller{}
	add := func(ref *admissionregistrationv1.ServiceReference, who string) {
		if ref != nil && ref.Namespace == namespace {
			out[ref.Name] = append(out[ref.Name], serviceCaller{who: who, port: webhookPort(ref)})
		}
	}
	var vwcs admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &vwcs); err != nil {
		return nil, fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)
	}
	for _, cfg := range vwcs.Items {
		for _, w := range cfg.Webhooks {
			add(w.ClientConfig.Service, fmt.Sprintf("webhook %s of ValidatingWebhookConfiguration %s", w.Name, cfg.Name))
		}
	}
	var mwcs admissionregistrationv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &mwcs); err != nil {
		return nil, fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	for _, cfg := range mwcs.Items {
		for _, w := range cfg.Webhooks {
			add(w.ClientConfig.Service, fmt.Sprintf("webhook %s of MutatingWebhookConfiguration %s", w.Name, cfg.Name))
		}
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &crds); err != nil {
		return nil, fmt.Errorf("listing CustomResourceDefinitions: %w", err)
	}
	for _, crd := range crds.Items {
		conv := crd.Spec.Conversion
		if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil {
			continue
		}
		ref := conv.Webhook.ClientConfig.Service
		add(&admissionregistrationv1.ServiceReference{Namespace: ref.Namespace, Name: ref.Name, Port: ref.Port},
			"the conversion webhook of CustomResourceDefinition "+crd.Name)
	}
	return out, nil
}

// onlyService is the one Service of callers, or an error that lists them and asks for
// --service.
func onlyService(namespace string, callers map[string][]serviceCaller) (string, error) {
	names := make([]string, 0, len(callers))
	for name := range callers {
		names = append(names, name)
	}
	sort.Strings(names)
	switch len(names) {
	case 1:
		return names[0], nil
	case 0:
		return "", fmt.Errorf("no ValidatingWebhookConfiguration, MutatingWebhookConfiguration or CRD conversion webhook calls a Service in namespace %s: "+
			"check --namespace, or pass --service NAME to examine a Service whose webhook configurations are gone", namespace)
	}
	var list []string
	for _, name := range names {
		var who []string
		for _, c := range callers[name] {
			who = append(who, c.who)
		}
		list = append(list, fmt.Sprintf("%s (called by %s)", name, strings.Join(who, ", ")))
	}
	return "", fmt.Errorf("webhooks call %d Services in namespace %s: %s; pass --service NAME to choose the one to examine",
		len(names), namespace, strings.Join(list, "; "))
}

// resolve names what the checks examine for any operator: the Service (given, or the one the
// webhooks call), the Deployment its selector matches, and the serving-certificate Secret
// (given, or the one the serving container mounts). A Service, Deployment or Secret it cannot
// find is left for the checks to report; only an unsettled Service name is an error.
func (s *session) resolve(ctx context.Context, o WebhookOptions) error {
	callers, err := serviceCallers(ctx, s.client, o.Namespace)
	if err != nil {
		return err
	}
	s.serviceName, s.secretName, s.configurations = o.Service, o.Secret, o.Configurations
	if s.serviceName == "" {
		if s.serviceName, err = onlyService(o.Namespace, callers); err != nil {
			return err
		}
	}
	key := client.ObjectKey{Namespace: o.Namespace, Name: s.serviceName}
	var svc corev1.Service
	if err := s.client.Get(ctx, key, &svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("getting Service %s: %w", key, err)
		}
		s.noSecret = fmt.Sprintf("Service %s not found, so no serving container to read the Secret's name from: pass --secret", key)
		return nil
	}
	if len(svc.Spec.Selector) > 0 {
		s.fix.podSelector = labels.Set(svc.Spec.Selector).String()
	}
	deploy, why, err := backingDeployment(ctx, s.client, &svc)
	if err != nil {
		return err
	}
	if deploy == nil {
		s.noSecret = why + ": pass --secret"
		return nil
	}
	s.deployment, s.deploymentName, s.fix.deployment = deploy, deploy.Name, deploy.Name
	if s.secretName == "" {
		port := int32(443)
		if cs := callers[s.serviceName]; len(cs) > 0 {
			port = cs[0].port
		}
		s.secretName, s.noSecret = servingSecret(deploy, &svc, port)
	}
	return nil
}

// backingDeployment is the one Deployment in the Service's namespace whose Pods the Service's
// selector matches; when there is none or several, why says so.
func backingDeployment(ctx context.Context, c client.Client, svc *corev1.Service) (deploy *appsv1.Deployment, why string, err error) {
	key := client.ObjectKeyFromObject(svc)
	if len(svc.Spec.Selector) == 0 {
		return nil, fmt.Sprintf("Service %s has no selector, so no Deployment behind it", key), nil
	}
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list, client.InNamespace(svc.Namespace)); err != nil {
		return nil, "", fmt.Errorf("listing the Deployments of namespace %s: %w", svc.Namespace, err)
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	var found []*appsv1.Deployment
	var names []string
	for i := range list.Items {
		if sel.Matches(labels.Set(list.Items[i].Spec.Template.Labels)) {
			found = append(found, &list.Items[i])
			names = append(names, list.Items[i].Name)
		}
	}
	switch len(found) {
	case 1:
		return found[0], "", nil
	case 0:
		return nil, fmt.Sprintf("no Deployment in namespace %s has Pods that Service %s's selector %s matches", svc.Namespace, key, sel), nil
	}
	return nil, fmt.Sprintf("Deployments %s all have Pods that Service %s's selector %s matches", strings.Join(names, ", "), key, sel), nil
}

// servingSecret is the one Secret the serving container mounts: the container of deploy
// whose port is the targetPort of the Service port the webhooks call (the only container when
// none declares it). When there is no such Secret or several, why says so and asks for
// --secret.
func servingSecret(deploy *appsv1.Deployment, svc *corev1.Service, port int32) (name, why string) {
	where := fmt.Sprintf("Deployment %s/%s", deploy.Namespace, deploy.Name)
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return "", fmt.Sprintf("Service %s/%s has no port %d, the port the webhooks call, so its serving container is not known: pass --secret", svc.Namespace, svc.Name, port)
	}
	spec := deploy.Spec.Template.Spec
	c := servingContainer(spec.Containers, *sp)
	if c == nil {
		return "", fmt.Sprintf("no container of %s has port %s, the targetPort of Service %s/%s: pass --secret", where, targetPortOf(*sp), svc.Namespace, svc.Name)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	var secrets []string
	for _, m := range c.VolumeMounts {
		v := volumes[m.Name]
		if v.Secret != nil {
			secrets = append(secrets, v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					secrets = append(secrets, src.Secret.Name)
				}
			}
		}
	}
	slices.Sort(secrets)
	secrets = slices.Compact(secrets)
	switch len(secrets) {
	case 1:
		return secrets[0], ""
	case 0:
		return "", fmt.Sprintf("container %s of %s, which serves the webhook, mounts no Secret: pass --secret with the one that holds its serving certificate", c.Name, where)
	}
	return "", fmt.Sprintf("container %s of %s, which serves the webhook, mounts Secrets %s: pass --secret with the one that holds its serving certificate",
		c.Name, where, strings.Join(secrets, ", "))
}

// servingContainer is the container whose port (by number or name) is sp's targetPort; the
// only container when none declares it.
func servingContainer(cs []corev1.Container, sp corev1.ServicePort) *corev1.Container {
	tp := sp.TargetPort
	for i := range cs {
		for _, p := range cs[i].Ports {
			if (tp.StrVal != "" && p.Name == tp.StrVal) || (tp.StrVal == "" && p.ContainerPort == targetPortNumber(sp)) {
				return &cs[i]
			}
		}
	}
	if len(cs) == 1 {
		return &cs[0]
	}
	return nil
}

// targetPortNumber is a numeric targetPort (the port itself when unset).
func targetPortNumber(sp corev1.ServicePort) int32 {
	if sp.TargetPort.IntVal == 0 {
		return sp.Port
	}
	return sp.TargetPort.IntVal
}

func targetPortOf(sp corev1.ServicePort) string {
	if sp.TargetPort.StrVal != "" {
		return sp.TargetPort.StrVal
	}
	return fmt.Sprint(targetPortNumber(sp))
}
