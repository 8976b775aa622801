package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// FloorImage is the image repository the local provider maps to the floor webhook binary.
const FloorImage = "gauntlet-floor-webhook"

// FloorNamespace is where dry-run creates pass the floor webhooks (and no other).
const FloorNamespace = "bench-floor"

// FloorLabel labels FloorNamespace; the floor's webhooks select exactly namespaces with it.
const FloorLabel = "bench.gauntlet.dev/floor"

// FloorPatchingNamespace is where dry-run creates pass only the patching floor's webhooks: the
// floor's, its mutating one answering with the patch the benchmarked mutating webhook returns
// (FloorObjects.Stamp).
const FloorPatchingNamespace = "bench-floor-patching"

// FloorPatchingLabel labels FloorPatchingNamespace; the patching floor's webhooks select exactly
// namespaces with it.
const FloorPatchingLabel = "bench.gauntlet.dev/floor-patching"

// FloorDirectNamespace is where dry-run creates pass only the floor's webhooks called at the
// floor pod's address (a url: client configuration), bypassing the Service and the node's proxy.
const FloorDirectNamespace = "bench-floor-direct"

// FloorDirectLabel labels FloorDirectNamespace; the direct route's webhooks select exactly
// namespaces with it.
const FloorDirectLabel = "bench.gauntlet.dev/floor-direct"

// FloorStampValue is the value the patching floor's patch gives FloorObjects.Stamp.
const FloorStampValue = "gauntlet-floor"

// floorPackage is the floor webhook's main package, relative to the workspace root.
const floorPackage = "./bench/cmd/gauntlet-floor-webhook"

// The floor's objects. It runs in a namespace of its own, named like its
// Deployment and Service, so the API server calls it at floorName.floorName.svc.
const (
	floorName          = "gauntlet-floor"
	floorSecret        = "gauntlet-floor-tls"
	floorWebhookConfig = "gauntlet-bench-floor"
	floorWebhookPort   = 9443
	floorProbePort     = 8081
	floorCertDir       = "/tls"
)

// What the floor webhook answers a probe with (gauntlet-floor-webhook's
// contract): a review of an object whose name starts with floorProbePrefix
// gets the warning floorWarning, which the API server hands to the client.
const (
	floorProbePrefix = "floor-probe-"
	floorWarning     = "gauntlet floor webhook"
)

// BuildFloor builds bench/cmd/gauntlet-floor-webhook into the gauntlet cache and returns its path.
func BuildFloor(ctx context.Context) (string, error) {
	built, err := workspace.Build(ctx, workspace.BinDir(), workspace.BuildOptions{}, floorPackage)
	if err != nil {
		return "", fmt.Errorf("building the floor webhook: %w", err)
	}
	return built[floorPackage], nil
}

// InstallFloor deploys the floor webhook and waits until the API server routes FloorNamespace,
// FloorPatchingNamespace and FloorDirectNamespace through it.
//
// The floor serves a validating and a mutating webhook with the rules, match
// policy, timeout and failure policy the chart gives the operator's
// DynamoGraphDeployment webhooks, behind a Service of its own, so a dry-run
// create in FloorNamespace takes the operator's path (API server → Service →
// TLS → pod) to a server that does nothing. In FloorPatchingNamespace a second
// pair of webhooks calls the same pod, whose mutating one answers with the
// patch the operator's returns (the origin-version annotation, valued
// FloorStampValue): the API server's cost of applying it is then on the
// floor's side too. In FloorDirectNamespace a third pair calls the pod at its
// address (url:), bypassing the Service: the Service hop's cost is the
// difference. Every namespace also carries ControlLabel, which the bench
// release's webhooks skip. Objects that exist are kept, except the webhook
// configurations, which are replaced so that their CA bundle is the one of
// the floor's Secret.
//
// The wait ends when, in each namespace, a dry-run create comes back with the
// floor's warning, stamped by the patching floor alone, and one of an invalid
// DynamoGraphDeployment is admitted: the floor's webhooks run there and the
// operator's do not. The warning is read through a client made from a copy of
// restConfig; dyn makes the second request.
func InstallFloor(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, restConfig *rest.Config, logf func(string, ...any)) error {
	return InstallFloorFor(ctx, kube, dyn, restConfig, DynamoFloor(), logf)
}

// FloorObjects is what a floor's webhooks match and what its routing check creates.
type FloorObjects struct {
	// Resource is what the floor's webhooks match (CREATE and UPDATE), the resource the benchmarked
	// dry-run creates go to.
	Resource schema.GroupVersionResource
	// Admitted builds an object the benchmarked webhooks admit; Denied, one they deny (nil: the
	// routing check cannot show that they skip FloorNamespace this way).
	Admitted, Denied func(namespace, name string) *unstructured.Unstructured
	// Stamp is an annotation the benchmarked mutating webhook adds ("": none to look for, and no
	// patching floor).
	Stamp string
	// What names the benchmarked webhooks in errors, e.g. "the operator's".
	What string
	// Bypass adds the route of FloorDirectNamespace: the floor's webhooks called at its pod's
	// address.
	Bypass bool
}

// DynamoFloor is the floor of the reference operator's DynamoGraphDeployment webhooks.
func DynamoFloor() FloorObjects {
	return FloorObjects{Resource: dynamo.GraphDeployments, Admitted: dynamo.GraphDeployment, Denied: dynamo.InvalidGraphDeployment,
		Stamp: dynamo.OriginVersionAnnotation, What: "the operator's", Bypass: true}
}

// InstallFloorFor is InstallFloor with webhooks matching objs.Resource, checked with objs's objects.
func InstallFloorFor(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, restConfig *rest.Config, objs FloorObjects, logf func(string, ...any)) error {
	start := time.Now()
	patch, err := floorPatch(objs)
	if err != nil {
		return err
	}
	routes := floorRoutes(objs)
	for _, ns := range floorNamespaces(routes) {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Namespace %s: %w", ns.Name, err)
		}
	}
	caPEM, err := ensureFloorSecret(ctx, kube)
	if err != nil {
		return err
	}
	if _, err := kube.AppsV1().Deployments(floorName).Create(ctx, floorDeployment(patch), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Deployment %s/%s: %w", floorName, floorName, err)
	}
	if _, err := kube.CoreV1().Services(floorName).Create(ctx, floorService(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Service %s/%s: %w", floorName, floorName, err)
	}
	if err := release.WaitDeploymentAvailable(ctx, kube, floorName, floorName, 2*time.Minute); err != nil {
		return fmt.Errorf("starting the floor webhook: %w", err)
	}
	podIP := ""
	if objs.Bypass {
		pods, err := kube.CoreV1().Pods(floorName).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(floorLabels).String()})
		if err != nil {
			return fmt.Errorf("listing the floor's pods: %w", err)
		}
		pod, err := readyPod(pods.Items, "floor webhook")
		if err != nil {
			return err
		}
		podIP = pod.Status.PodIP
	}
	admission := kube.AdmissionregistrationV1()
	for _, route := range routes {
		validating, mutating := floorWebhooks(caPEM, objs.Resource, route, podIP)
		if err := createOrReplace(ctx, "ValidatingWebhookConfiguration", validating, admission.ValidatingWebhookConfigurations()); err != nil {
			return err
		}
		if err := createOrReplace(ctx, "MutatingWebhookConfiguration", mutating, admission.MutatingWebhookConfigurations()); err != nil {
			return err
		}
	}
	warned := &warningRecorder{}
	cfg := rest.CopyConfig(restConfig)
	cfg.WarningHandlerWithContext = warned
	recorded, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a dynamic client for %s: %w", cfg.Host, err)
	}
	for _, route := range routes {
		if err := waitFloorRouting(ctx, recorded, warned, dyn, objs, route); err != nil {
			return err
		}
		logf("%s answers in namespace %s, %s webhooks skip it (%.1fs)", route.what, route.namespace, objs.What, time.Since(start).Seconds())
	}
	return nil
}

// A floorRoute is a namespace whose dry-run creates pass only a pair of the floor's webhooks,
// named and selected by a label of its own.
type floorRoute struct {
	namespace, label string
	// configuration names both webhook configurations; prefix, their webhooks (prefix.bench.gauntlet.dev).
	configuration, prefix string
	// mutatePath is the path the mutating webhook calls; patching, whether its answer is the floor's patch.
	mutatePath string
	patching   bool
	// direct says the webhooks call the floor's pod at its address (url:), not its Service.
	direct bool
	// what names the route in progress lines.
	what string
}

// The floor's routes: the plain floor, the patching one, and the floor at its pod's address.
var (
	plainFloor = floorRoute{namespace: FloorNamespace, label: FloorLabel, configuration: floorWebhookConfig, prefix: "floor",
		mutatePath: "/mutate", what: "floor webhook"}
	patchingFloor = floorRoute{namespace: FloorPatchingNamespace, label: FloorPatchingLabel, configuration: floorWebhookConfig + "-patching",
		prefix: "floor-patching", mutatePath: "/mutate-patching", patching: true, what: "patching floor webhook"}
	directFloor = floorRoute{namespace: FloorDirectNamespace, label: FloorDirectLabel, configuration: floorWebhookConfig + "-direct",
		prefix: "floor-direct", mutatePath: "/mutate", direct: true, what: "floor webhook at its pod's address"}
)

// floorRoutes are the floor's routes for objs: the patching floor only when the benchmarked
// mutating webhook stamps something, the direct one when objs asks to bypass the Service.
func floorRoutes(objs FloorObjects) []floorRoute {
	routes := []floorRoute{plainFloor}
	if objs.Stamp != "" {
		routes = append(routes, patchingFloor)
	}
	if objs.Bypass {
		routes = append(routes, directFloor)
	}
	return routes
}

// floorPatch is the JSON patch of the patching floor: what the benchmarked mutating webhook
// returns for objs.Admitted, objs.Stamp added with FloorStampValue — one operation adding the
// annotation, or the annotations map when the object has none, as the operator writes it
// (operator/internal/webhook/defaulting). Empty when objs stamps nothing.
func floorPatch(objs FloorObjects) (string, error) {
	if objs.Stamp == "" {
		return "", nil
	}
	op := map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{objs.Stamp: FloorStampValue}}
	if objs.Admitted(FloorPatchingNamespace, "floor-patch").GetAnnotations() != nil {
		op = map[string]any{"op": "add", "path": "/metadata/annotations/" + pointerEscaper.Replace(objs.Stamp), "value": FloorStampValue}
	}
	patch, err := json.Marshal([]any{op})
	if err != nil {
		return "", fmt.Errorf("encoding the patching floor's patch: %w", err)
	}
	return string(patch), nil
}

// pointerEscaper escapes a key as a JSON pointer's reference token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// floorNamespaces are the floor's own namespace and one per route, which the route's webhooks
// select (its label) and the bench release's skip (ControlLabel).
func floorNamespaces(routes []floorRoute) []*corev1.Namespace {
	out := []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: floorName}}}
	for _, r := range routes {
		out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.namespace, Labels: map[string]string{r.label: "true", ControlLabel: "true"}}})
	}
	return out
}

// floorHost is the floor Service's host name, which the API server expects
// the serving certificate to carry.
const floorHost = floorName + "." + floorName + ".svc"

// floorCAKey is the Secret's key holding the floor CA's private key.
const floorCAKey = "ca.key"

// ensureFloorSecret creates the floor's serving certificate and its Secret
// (with its CA's key, for the floor's --ip-san), and returns the CA (PEM) the
// webhooks must trust. When the Secret exists it
// is kept, and its CA is returned: the floor's pod may already serve it.
func ensureFloorSecret(ctx context.Context, kube kubernetes.Interface) ([]byte, error) {
	ca, err := pki.NewCertificateAuthority("gauntlet bench floor webhook CA", 365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	sc, err := ca.Issue(pki.LeafOptions{DNSNames: []string{floorHost}})
	if err != nil {
		return nil, err
	}
	ref := floorName + "/" + floorSecret
	secret := pki.ServingSecret(floorName, floorSecret, sc, false)
	// The floor issues itself a certificate for its pod's address from the CA (its --ip-san): a
	// CA of the bench's own, made for this floor alone.
	if secret.Data[floorCAKey], err = ca.KeyPEM(); err != nil {
		return nil, err
	}
	_, err = kube.CoreV1().Secrets(floorName).Create(ctx, secret, metav1.CreateOptions{})
	switch {
	case err == nil:
		return sc.CAPEM, nil
	case !apierrors.IsAlreadyExists(err):
		return nil, fmt.Errorf("creating Secret %s: %w", ref, err)
	}
	existing, err := kube.CoreV1().Secrets(floorName).Get(ctx, floorSecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the CA of the existing Secret %s: %w", ref, err)
	}
	for _, key := range []string{"ca.crt", floorCAKey} {
		if len(existing.Data[key]) == 0 {
			return nil, fmt.Errorf("the existing Secret %s has no %s: delete Namespace %s and install the floor again", ref, key, floorName)
		}
	}
	return existing.Data["ca.crt"], nil
}

// floorLabels select the floor's pod.
var floorLabels = map[string]string{"app.kubernetes.io/name": FloorImage, "app.kubernetes.io/part-of": "gauntlet-bench"}

// floorDeployment runs one floor webhook with the serving certificate mounted
// read-only, Ready once its probe port answers; patch, when not empty, is the
// patching floor's answer.
func floorDeployment(patch string) *appsv1.Deployment {
	args := []string{
		fmt.Sprintf("--port=%d", floorWebhookPort),
		"--cert-dir=" + floorCertDir,
		fmt.Sprintf("--probe-port=%d", floorProbePort),
		// A certificate for its address too: the direct route calls it there.
		"--ip-san=$(POD_IP)",
	}
	if patch != "" {
		args = append(args, "--patch="+patch)
	}
	replicas := int32(1)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: floorName, Namespace: floorName, Labels: floorLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: floorLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: floorLabels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "webhook",
						Image: FloorImage,
						Args:  args,
						Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"},
						}}},
						Ports: []corev1.ContainerPort{
							{Name: "webhook-server", ContainerPort: floorWebhookPort, Protocol: corev1.ProtocolTCP},
							{Name: "healthz", ContainerPort: floorProbePort, Protocol: corev1.ProtocolTCP},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("healthz")}},
							// The floor starts in milliseconds; the install should not wait a default period for it.
							PeriodSeconds: 1,
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: floorCertDir, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: floorSecret}}}},
				},
			},
		},
	}
}

// floorService is the floor's webhook Service: port 443 to the pod's
// webhook-server port, as the chart's Service does for the operator.
func floorService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: floorName, Namespace: floorName, Labels: floorLabels},
		Spec: corev1.ServiceSpec{
			Selector: floorLabels,
			Ports: []corev1.ServicePort{{
				Name: "webhook", Port: 443, TargetPort: intstr.FromString("webhook-server"), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// floorWebhooks are the webhook configurations of a route of the floor: one
// webhook each, matching resource as the chart's DynamoGraphDeployment
// webhooks match theirs (see charts/dynamo-operator/files/webhook/manifests.yaml,
// checked by TestFloorWebhooksMatchWhatTheChartsDynamoGraphDeploymentWebhooksMatch),
// in the namespaces labelled route.label, trusting caPEM. A direct route's
// webhooks call the floor pod at podIP.
func floorWebhooks(caPEM []byte, resource schema.GroupVersionResource, route floorRoute, podIP string) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{resource.Group},
			APIVersions: []string{resource.Version},
			Resources:   []string{resource.Resource},
		},
	}}
	client := func(path string) admissionregistrationv1.WebhookClientConfig {
		if route.direct {
			url := "https://" + net.JoinHostPort(podIP, strconv.Itoa(floorWebhookPort)) + path
			return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
		}
		port := int32(443)
		return admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: floorName, Name: floorName, Path: &path, Port: &port},
			CABundle: caPEM,
		}
	}
	sideEffects := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	equivalent := admissionregistrationv1.Equivalent
	timeout := int32(10)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{route.label: "true"}}
	meta := metav1.ObjectMeta{Name: route.configuration, Labels: floorLabels}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: meta,
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: "validate." + route.prefix + ".bench.gauntlet.dev", ClientConfig: client("/validate"), Rules: rules,
				FailurePolicy: &fail, MatchPolicy: &equivalent, NamespaceSelector: selector, SideEffects: &sideEffects,
				TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
			}},
		}, &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: meta,
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: "mutate." + route.prefix + ".bench.gauntlet.dev", ClientConfig: client(route.mutatePath), Rules: rules,
				FailurePolicy: &fail, MatchPolicy: &equivalent, NamespaceSelector: selector, SideEffects: &sideEffects,
				TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
			}},
		}
}

// objectClient is what createOrReplace needs of a typed client of cluster-scoped objects.
type objectClient[T metav1.Object] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
}

// createOrReplace creates obj, or replaces the object of that name with it.
func createOrReplace[T metav1.Object](ctx context.Context, kind string, obj T, c objectClient[T]) error {
	_, err := c.Create(ctx, obj, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s: %w", kind, obj.GetName(), err)
	}
	existing, err := c.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the existing %s %s: %w", kind, obj.GetName(), err)
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	if _, err := c.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("replacing %s %s: %w", kind, obj.GetName(), err)
	}
	return nil
}

// waitFloorRouting waits until a dry-run create of an admitted object in
// route's namespace (through recorded, whose warnings warned records) comes
// back with the floor's warning and stamped as the route stamps it (the
// patching floor with FloorStampValue, the plain floor not at all), and one of
// a denied object (through dyn) is admitted: the floor's webhooks run there,
// the benchmarked ones do not. The first answers may still route the old way
// while the API server's informers catch up with the new webhook
// configurations and Service endpoints.
func waitFloorRouting(ctx context.Context, recorded dynamic.Interface, warned *warningRecorder, dyn dynamic.Interface, objs FloorObjects, route floorRoute) error {
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	ns := route.namespace
	what := fmt.Sprintf("dry-run creates of %s in namespace %s to come back with the floor webhook's warning %q and to skip %s webhooks", objs.Resource.Resource, ns, floorWarning, objs.What)
	return poll.Until(ctx, what, time.Minute, func(ctx context.Context) (bool, string, error) {
		name := floorProbePrefix + rand.String(5)
		warned.take()
		got, err := recorded.Resource(objs.Resource).Namespace(ns).Create(ctx, objs.Admitted(ns, name), dry)
		warnings := warned.take()
		if err != nil {
			return false, err.Error(), nil
		}
		if !slices.Contains(warnings, floorWarning) {
			return false, fmt.Sprintf("admitted with warnings %q, none of them the floor webhook's", warnings), nil
		}
		if msg := wrongStamp(got.GetAnnotations(), objs, route); msg != "" {
			return false, msg, nil
		}
		if objs.Denied == nil {
			return true, "", nil
		}
		// Not a probe's name: the caller's client would print the floor's warning.
		denied := objs.Denied(ns, "floor-denied-"+rand.String(5))
		if _, err := dyn.Resource(objs.Resource).Namespace(ns).Create(ctx, denied, dry); err != nil {
			return false, fmt.Sprintf("an object %s webhooks deny was refused (does their validating webhook select the namespace?): %v", objs.What, err), nil
		}
		return true, "", nil
	})
}

// wrongStamp says what is wrong with the stamp of an object admitted in route's namespace
// (annotations), or "" when nothing is: the plain floor leaves objs.Stamp out, the patching
// floor sets it to FloorStampValue, and any other value is the benchmarked webhook's.
func wrongStamp(annotations map[string]string, objs FloorObjects, route floorRoute) string {
	if objs.Stamp == "" {
		return ""
	}
	v, ok := annotations[objs.Stamp]
	switch {
	case route.patching && !ok:
		return fmt.Sprintf("admitted without %s: the patching floor's mutating webhook did not patch it", objs.Stamp)
	case ok && v != FloorStampValue:
		return fmt.Sprintf("admitted stamped with %s=%q: %s mutating webhook selects the namespace too", objs.Stamp, v, objs.What)
	case ok && !route.patching:
		return fmt.Sprintf("admitted stamped with %s=%q: the patching floor's mutating webhook selects namespace %s too", objs.Stamp, v, route.namespace)
	}
	return ""
}

// warningRecorder is a client-go warning handler that keeps the warnings the
// API server returns, until taken.
type warningRecorder struct {
	mu    sync.Mutex
	texts []string
}

// HandleWarningHeaderWithContext records one warning.
func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// take returns the warnings recorded since the last take.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	texts := w.texts
	w.texts = nil
	return texts
}
