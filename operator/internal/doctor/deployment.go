package doctor

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/internal/certs"
)

// Check IDs, in the order they run.
const (
	CheckAPIServer          = "api-server"
	CheckDeployment         = "operator-deployment"
	CheckRBAC               = "cert-controller-rbac"
	CheckSecret             = "certificate-secret"
	CheckConfigurations     = "webhook-configurations"
	CheckCABundle           = "ca-bundle"
	CheckNamespaceSelector  = "namespace-selector"
	CheckService            = "webhook-service"
	CheckEndpoints          = "service-endpoints"
	CheckServingCertificate = "serving-certificate"
	CheckLogs               = "operator-logs"
	CheckDryRun             = "admission-dry-run"
)

// allChecks is the documented checklist. Every check's needs and after come before it.
func allChecks() []check {
	api := []string{CheckAPIServer}
	return []check{
		{id: CheckAPIServer, title: "Kubernetes API server is reachable", run: checkAPIServer},
		{id: CheckDeployment, title: "operator Deployment exists", needs: api, run: checkDeployment},
		{id: CheckRBAC, title: "operator ServiceAccount has the cert-controller's permissions", needs: api,
			after: []string{CheckDeployment}, run: checkRBAC},
		{id: CheckSecret, title: "serving-certificate Secret is usable", needs: api,
			after: []string{CheckDeployment, CheckRBAC}, run: checkSecret},
		{id: CheckConfigurations, title: "webhook configurations exist", needs: api,
			after: []string{CheckDeployment}, run: checkConfigurations},
		{id: CheckCABundle, title: "every webhook has a caBundle that trusts the serving certificate", needs: api,
			after: []string{CheckDeployment, CheckRBAC, CheckSecret, CheckConfigurations}, run: checkCABundle},
		{id: CheckNamespaceSelector, title: "namespaceSelector selects the test namespace", needs: api,
			after: []string{CheckDeployment, CheckConfigurations}, run: checkNamespaceSelector},
		{id: CheckService, title: "webhooks point at the existing webhook Service", needs: api,
			after: []string{CheckDeployment}, run: checkService},
		{id: CheckEndpoints, title: "webhook Service has ready endpoints", needs: []string{CheckAPIServer, CheckService},
			after: []string{CheckDeployment, CheckRBAC, CheckSecret}, run: checkEndpoints},
		{id: CheckServingCertificate, title: "served certificate is trusted by the caBundle and valid for the Service",
			needs: []string{CheckAPIServer, CheckService, CheckEndpoints},
			after: []string{CheckDeployment, CheckRBAC, CheckSecret, CheckCABundle}, run: checkServingCertificate},
		{id: CheckLogs, title: "operator logs show the webhooks registered and the server started",
			needs: []string{CheckAPIServer, CheckDeployment},
			after: []string{CheckRBAC, CheckSecret, CheckEndpoints}, run: checkLogs},
		{id: CheckDryRun, title: "server-side dry-run: valid object admitted, invalid object denied by the webhook", needs: api,
			after: []string{CheckDeployment, CheckRBAC, CheckSecret, CheckConfigurations, CheckCABundle, CheckNamespaceSelector,
				CheckService, CheckEndpoints, CheckServingCertificate}, run: checkDryRun},
	}
}

// facts are the names the checks use and what earlier checks found.
type facts struct {
	fix fixes

	deploymentName string
	serviceName    string
	secretName     string
	validatingName string
	mutatingName   string
	saName         string
	conversionCRD  string
	restrictedTo   string
	mode           certs.Mode
	// namesFromArgs is set when the Deployment's arguments named the objects; otherwise the
	// chart's default names are guesses (and the restricted variants are looked for).
	namesFromArgs bool
	container     string
	deployment    *appsv1.Deployment

	// validating and mutating are the configurations found: a release's two, or, for any
	// operator, every configuration with a webhook that calls the Service (holding only those
	// webhooks).
	validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	mutating   []*admissionregistrationv1.MutatingWebhookConfiguration
	// configurations are, for any operator, the configurations its installation makes
	// (WebhookOptions.Configurations): each must exist.
	configurations []string

	// secretChain is tls.crt of a usable Secret (leaf first).
	secretChain []*x509.Certificate
	// noSecret says why no serving-certificate Secret is named (any operator's webhook,
	// without --secret, whose serving container mounts none or several).
	noSecret string
	// bundles are the distinct, parseable caBundles and the webhooks that carry them.
	bundles []trustBundle
	service *corev1.Service
	// servicePort is the Service port the webhooks call.
	servicePort corev1.ServicePort
	// endpoints are the ready endpoints behind servicePort.
	endpoints []endpoint
}

// defaultFacts are the chart's names for a release, before the Deployment is read.
func defaultFacts(o Options) facts {
	f := facts{ //nolint:gosec // G101: secretName is the name of a Kubernetes Secret, not a credential
		deploymentName: o.Release + "-operator",
		serviceName:    o.Release + "-webhook-service",
		secretName:     "webhook-server-cert",
		validatingName: o.Release + "-validating",
		mutatingName:   o.Release + "-mutating",
		saName:         o.Release + "-operator",
		mode:           certs.ModeAutomatic,
		container:      "operator",
	}
	f.fix = fixes{release: o.Release, namespace: o.Namespace, chart: o.Chart, deployment: f.deploymentName}
	return f
}

// serviceHost is the name the API server verifies the serving certificate against.
func (s *session) serviceHost() string { return s.serviceName + "." + s.opts.Namespace + ".svc" }

// testNamespace is where the selector match and the dry-runs are checked.
func (s *session) testNamespace() string {
	switch {
	case s.opts.TestNamespace != "":
		return s.opts.TestNamespace
	case s.restrictedTo != "":
		return s.restrictedTo
	}
	return "default"
}

func checkAPIServer(ctx context.Context, s *session) outcome {
	const title = "Kubernetes API server is reachable"
	var v version.Info
	raw, err := s.clientset.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err == nil {
		err = json.Unmarshal(raw, &v)
	}
	if err != nil {
		return failure(title, undocumented(
			fmt.Sprintf("cannot reach the API server at %s: %v", s.cfg.Host, err),
			"kubectl cluster-info   # check --kubeconfig/--context"))
	}
	return pass(fmt.Sprintf("Kubernetes API server %s is reachable (%s)", s.cfg.Host, v.GitVersion))
}

// checkDeployment finds the operator Deployment and reads the names it was started with.
func checkDeployment(ctx context.Context, s *session) outcome {
	key := client.ObjectKey{Namespace: s.opts.Namespace, Name: s.deploymentName}
	title := fmt.Sprintf("operator Deployment %s exists", key)
	var d appsv1.Deployment
	if err := s.client.Get(ctx, key, &d); err != nil {
		if apierrors.IsNotFound(err) {
			return failure(title, undocumented(
				fmt.Sprintf("Deployment %s not found: release %q is not installed in namespace %s (check --release and --namespace)",
					key, s.opts.Release, s.opts.Namespace),
				fmt.Sprintf("helm list --all-namespaces --filter '^%s$'", s.opts.Release),
				s.fix.reinstall("--install")))
		}
		return failure(title, readError("getting Deployment "+key.String(), err))
	}
	s.deployment = &d
	c := operatorContainer(&d)
	if c == nil {
		return failure(title, undocumented(fmt.Sprintf("Deployment %s has no containers", key), s.fix.reinstall()))
	}
	s.container = c.Name
	args := parseArgs(c.Args)
	set := func(dst *string, flag string) {
		if v, ok := args[flag]; ok && v != "" {
			*dst = v
			s.namesFromArgs = true
		}
	}
	set(&s.serviceName, "webhook-service")
	set(&s.secretName, "webhook-cert-secret")
	set(&s.validatingName, "validating-webhook-configuration")
	set(&s.mutatingName, "mutating-webhook-configuration")
	set(&s.conversionCRD, "conversion-crd")
	s.restrictedTo = args["restrict-to-namespace"]
	if m, err := certs.ParseMode(args["webhook-cert-mode"]); err == nil {
		s.mode = m
	}
	if d.Spec.Template.Spec.ServiceAccountName != "" {
		s.saName = d.Spec.Template.Spec.ServiceAccountName
	}

	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	details := []string{
		fmt.Sprintf("replicas: %d desired, %d ready, %d available", want, d.Status.ReadyReplicas, d.Status.AvailableReplicas),
		fmt.Sprintf("certificate mode: %s", s.mode),
		fmt.Sprintf("image: %s", c.Image),
	}
	if s.restrictedTo != "" {
		details = append(details, "namespace-restricted to "+s.restrictedTo)
	}
	if !s.namesFromArgs {
		details = append(details, "the container's arguments name no webhook objects: using the chart's default names")
	}
	return pass(title, details...)
}

// operatorContainer is the Deployment's operator container: the one named "operator", the
// default-container annotation's, or the first.
func operatorContainer(d *appsv1.Deployment) *corev1.Container {
	cs := d.Spec.Template.Spec.Containers
	want := d.Spec.Template.Annotations["kubectl.kubernetes.io/default-container"]
	for _, name := range []string{"operator", want} {
		for i := range cs {
			if name != "" && cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return &cs[0]
}

// parseArgs reads --flag=value (and --flag value) arguments into a map keyed by flag name.
func parseArgs(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name := strings.TrimLeft(a, "-")
		if k, v, ok := strings.Cut(name, "="); ok {
			out[k] = v
			continue
		}
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out[name] = args[i+1]
			i++
			continue
		}
		out[name] = "true"
	}
	return out
}

// readError is the cause of a failed read: the doctor's own credentials, or the API server.
func readError(action string, err error) cause {
	if apierrors.IsForbidden(err) {
		return undocumented(fmt.Sprintf("%s: forbidden for the doctor's credentials: %v", action, err),
			"run the doctor with credentials that can read the release's objects (e.g. cluster-admin)")
	}
	return undocumented(fmt.Sprintf("%s: %v", action, err), "kubectl cluster-info   # check the API server")
}
