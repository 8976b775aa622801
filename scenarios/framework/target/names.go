package target

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

// Webhook is one webhook the rendered chart registers.
type Webhook struct {
	Name           string // as in its configuration, e.g. validation.gatekeeper.sh
	Configuration  string // the Validating- or MutatingWebhookConfiguration's name
	Mutating       bool
	Path           string // the Service path the API server posts to
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	TimeoutSeconds int32
}

// Served is what the checks need to know about a target's webhooks, read from the rendered chart.
type Served struct {
	Namespace string
	Webhooks  []Webhook
	// Service is the one Service every webhook and conversion points at; ServicePort its port.
	Service     string
	ServicePort int32
	// Deployment runs the pods behind Service; Container is the one serving its target port,
	// on ContainerPort.
	Deployment    string
	Replicas      int32
	Container     string
	ContainerPort int32
	// Secret holds the serving certificate the container mounts.
	Secret string
	// ConversionCRDs are the CRDs whose conversion webhook is the Service.
	ConversionCRDs []string
	// Readiness is the serving container's HTTP readiness probe ("" without one): path and port.
	ReadinessPath string
	ReadinessPort int32
}

// ServiceHost is the name the serving certificate must carry: <service>.<namespace>.svc.
func (s Served) ServiceHost() string { return s.Service + "." + s.Namespace + ".svc" }

// Configurations lists the webhook configurations' names, validating ones first.
func (s Served) Configurations() (validating, mutating []string) {
	for _, w := range s.Webhooks {
		list := &validating
		if w.Mutating {
			list = &mutating
		}
		if !slices.Contains(*list, w.Configuration) {
			*list = append(*list, w.Configuration)
		}
	}
	return validating, mutating
}

// ServedBy reads what the checks need from objs, the chart rendered (CRDs included) into
// namespace. names settles what the chart leaves open (several Deployments behind the Service,
// several Secrets mounted); where the chart leaves a choice and names does not make it, the
// error lists the candidates and the field to set.
func ServedBy(objs []*unstructured.Unstructured, namespace string, names Names) (Served, error) {
	s := Served{Namespace: namespace}
	services := map[string]bool{}
	var serviceRefs []*admissionregistrationv1.ServiceReference
	var errs []error
	for _, o := range objs {
		switch o.GetKind() {
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			if err := fromUnstructured(o, &c); err != nil {
				return s, err
			}
			for _, w := range c.Webhooks {
				s.Webhooks = append(s.Webhooks, webhookOf(c.Name, false, w.Name, w.ClientConfig, w.FailurePolicy, w.TimeoutSeconds))
				serviceRefs = append(serviceRefs, w.ClientConfig.Service)
			}
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			if err := fromUnstructured(o, &c); err != nil {
				return s, err
			}
			for _, w := range c.Webhooks {
				s.Webhooks = append(s.Webhooks, webhookOf(c.Name, true, w.Name, w.ClientConfig, w.FailurePolicy, w.TimeoutSeconds))
				serviceRefs = append(serviceRefs, w.ClientConfig.Service)
			}
		case "CustomResourceDefinition":
			var crd apiextensionsv1.CustomResourceDefinition
			if err := fromUnstructured(o, &crd); err != nil {
				return s, err
			}
			if c := crd.Spec.Conversion; c != nil && c.Strategy == apiextensionsv1.WebhookConverter && c.Webhook != nil && c.Webhook.ClientConfig != nil && c.Webhook.ClientConfig.Service != nil {
				svc := c.Webhook.ClientConfig.Service
				s.ConversionCRDs = append(s.ConversionCRDs, crd.Name)
				services[svc.Name] = true
			}
		}
	}
	if len(s.Webhooks) == 0 {
		return s, errors.New("the rendered chart registers no webhook: no ValidatingWebhookConfiguration or MutatingWebhookConfiguration")
	}
	for i, ref := range serviceRefs {
		if ref == nil {
			errs = append(errs, fmt.Errorf("webhook %s is called by URL, not through a Service: the checks follow a Service to its pods", s.Webhooks[i].Name))
			continue
		}
		services[ref.Name] = true
		if ref.Port != nil {
			s.ServicePort = *ref.Port
		} else {
			s.ServicePort = 443
		}
	}
	if err := errors.Join(errs...); err != nil {
		return s, err
	}
	if len(services) != 1 {
		return s, fmt.Errorf("the webhooks point at %d Services (%s): the checks follow one Service to the pods that serve them", len(services), strings.Join(sortedKeys(services), ", "))
	}
	s.Service = sortedKeys(services)[0]

	var svc *corev1.Service
	var deployments []appsv1.Deployment
	for _, o := range objs {
		switch {
		case o.GetKind() == "Service" && o.GetName() == s.Service:
			svc = &corev1.Service{}
			if err := fromUnstructured(o, svc); err != nil {
				return s, err
			}
		case o.GetKind() == "Deployment":
			var d appsv1.Deployment
			if err := fromUnstructured(o, &d); err != nil {
				return s, err
			}
			deployments = append(deployments, d)
		}
	}
	if svc == nil {
		return s, fmt.Errorf("the webhooks point at Service %s, which the chart does not render", s.Service)
	}
	selector := labels.SelectorFromSet(svc.Spec.Selector)
	var behind []string
	var d *appsv1.Deployment
	for i := range deployments {
		if len(svc.Spec.Selector) > 0 && selector.Matches(labels.Set(deployments[i].Spec.Template.Labels)) {
			behind = append(behind, deployments[i].Name)
			if names.Deployment == "" || names.Deployment == deployments[i].Name {
				d = &deployments[i]
			}
		}
	}
	switch {
	case len(behind) == 0:
		return s, fmt.Errorf("no Deployment's pods match Service %s's selector %s", s.Service, selector)
	case names.Deployment != "" && d == nil:
		return s, fmt.Errorf("names.deployment %s is not behind Service %s (those behind it: %s)", names.Deployment, s.Service, strings.Join(behind, ", "))
	case names.Deployment == "" && len(behind) > 1:
		return s, fmt.Errorf("the Deployments %s are all behind Service %s: set names.deployment to the one that serves the webhooks", strings.Join(behind, ", "), s.Service)
	}
	s.Deployment = d.Name
	s.Replicas = 1
	if d.Spec.Replicas != nil {
		s.Replicas = *d.Spec.Replicas
	}

	port := servicePort(svc, s.ServicePort)
	if port == nil {
		return s, fmt.Errorf("the Service %s has no port %d, the webhooks' port", s.Service, s.ServicePort)
	}
	c, containerPort := servingContainer(d.Spec.Template.Spec.Containers, port.TargetPort)
	if c == nil {
		return s, fmt.Errorf("no container of Deployment %s has Service %s's target port %s", d.Name, s.Service, port.TargetPort.String())
	}
	s.Container, s.ContainerPort = c.Name, containerPort
	if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil {
		s.ReadinessPath = p.HTTPGet.Path
		if rp, ok := portNumber(c, p.HTTPGet.Port); ok {
			s.ReadinessPort = rp
		}
	}

	secrets := mountedSecrets(d.Spec.Template.Spec.Volumes, c.VolumeMounts)
	switch {
	case names.Secret != "" && len(secrets) > 0 && !slices.Contains(secrets, names.Secret):
		return s, fmt.Errorf("names.secret %s is not mounted by container %s of Deployment %s (it mounts: %s)", names.Secret, c.Name, d.Name, strings.Join(secrets, ", "))
	case names.Secret != "":
		s.Secret = names.Secret
	case len(secrets) == 1:
		s.Secret = secrets[0]
	case len(secrets) == 0:
		return s, fmt.Errorf("container %s of Deployment %s mounts no Secret (it reads its certificate some other way): set names.secret to the Secret holding it", c.Name, d.Name)
	default:
		return s, fmt.Errorf("container %s of Deployment %s mounts Secrets %s: set names.secret to the one holding the serving certificate", c.Name, d.Name, strings.Join(secrets, ", "))
	}
	return s, nil
}

func webhookOf(configuration string, mutating bool, name string, cc admissionregistrationv1.WebhookClientConfig, fp *admissionregistrationv1.FailurePolicyType, timeout *int32) Webhook {
	w := Webhook{Name: name, Configuration: configuration, Mutating: mutating, FailurePolicy: admissionregistrationv1.Fail, TimeoutSeconds: 10}
	if cc.Service != nil && cc.Service.Path != nil {
		w.Path = *cc.Service.Path
	}
	if fp != nil {
		w.FailurePolicy = *fp
	}
	if timeout != nil {
		w.TimeoutSeconds = *timeout
	}
	return w
}

func servicePort(svc *corev1.Service, port int32) *corev1.ServicePort {
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			return &svc.Spec.Ports[i]
		}
	}
	return nil
}

// servingContainer is the container that declares the target port (a number, or a port's
// name) and that port's number; a lone container serves a numbered port it does not declare.
func servingContainer(containers []corev1.Container, target intstr.IntOrString) (*corev1.Container, int32) {
	for i := range containers {
		for _, cp := range containers[i].Ports {
			if (target.Type == intstr.String && cp.Name == target.StrVal) || (target.Type == intstr.Int && cp.ContainerPort == target.IntVal) {
				return &containers[i], cp.ContainerPort
			}
		}
	}
	if target.Type == intstr.Int && len(containers) == 1 {
		return &containers[0], target.IntVal
	}
	return nil, 0
}

func portNumber(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	if p.Type == intstr.Int {
		return p.IntVal, true
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// mountedSecrets are the Secrets of volumes the container mounts, in mount order.
func mountedSecrets(volumes []corev1.Volume, mounts []corev1.VolumeMount) []string {
	var secrets []string
	for _, m := range mounts {
		for _, v := range volumes {
			if v.Name == m.Name && v.Secret != nil && !slices.Contains(secrets, v.Secret.SecretName) {
				secrets = append(secrets, v.Secret.SecretName)
			}
		}
	}
	return secrets
}

func fromUnstructured(o *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		return fmt.Errorf("reading %s %s from the rendered chart: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Installed is a target as a suite installed it: in one certificate mode, into Namespace, with
// what its rendered chart serves.
type Installed struct {
	Target    *Target
	Mode      string
	Namespace string
	Served    Served
}

// standInPath is where a stand-in image holds the stand-in when the chart's commands name no
// path for it.
const standInPath = "/gauntlet-standin"

// Entrypoints settles, from the containers of objs (the rendered chart), where images hold
// what the description leaves to the chart: a built image's entrypoint, when the description
// gives no path, is the one path the chart's commands name for the image beyond its declared
// programs (or /<the program's name> when they name none); a stand-in is held at every path the
// chart's commands name for its image, so whatever they run is the stand-in. An image the chart
// runs as two programs the description does not declare is an error naming the field to set.
func (t *Target) Entrypoints(images map[string]cluster.Image, objs []*unstructured.Unstructured) (map[string]cluster.Image, error) {
	commands := commandsRun(objs)
	out := map[string]cluster.Image{}
	for ref, img := range images {
		out[ref] = img
	}
	var errs []error
	for i, b := range t.Source.Binaries {
		img := out[b.Image]
		if img.Entrypoint != "" {
			continue
		}
		var undeclared []string
		for _, c := range commands[b.Image] {
			if _, declared := img.Programs[c]; !declared {
				undeclared = append(undeclared, c)
			}
		}
		switch len(undeclared) {
		case 0:
			img.Entrypoint = "/" + filepath.Base(img.Binary)
		case 1:
			img.Entrypoint = undeclared[0]
		default:
			errs = append(errs, t.problem(fmt.Sprintf("source.binaries[%d].path", i),
				"the chart runs image %s as %s: give the entrypoint's path here, and each other program under programs", b.Image, strings.Join(undeclared, " and ")))
		}
		out[b.Image] = img
	}
	for _, si := range t.Source.StandIns {
		img := out[si.Image]
		img.Entrypoint, img.Programs = standInPath, map[string]string{}
		for i, c := range commands[si.Image] {
			if i == 0 {
				img.Entrypoint = c
				continue
			}
			img.Programs[c] = img.Binary
		}
		out[si.Image] = img
	}
	return out, errors.Join(errs...)
}

// commandsRun are, for every image the pod templates of objs run, the distinct paths their
// containers' commands name as their program, in the order the chart gives them; a name
// without a slash is where a container runtime finds it along the default PATH of an image
// that sets none, /usr/local/bin.
func commandsRun(objs []*unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	for _, o := range objs {
		var spec []string
		switch o.GetKind() {
		case "Pod":
			spec = []string{"spec"}
		case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
			spec = []string{"spec", "template", "spec"}
		case "CronJob":
			spec = []string{"spec", "jobTemplate", "spec", "template", "spec"}
		default:
			continue
		}
		for _, field := range []string{"initContainers", "containers"} {
			containers, _, _ := unstructured.NestedSlice(o.Object, append(spec, field)...)
			for _, c := range containers {
				cm, _ := c.(map[string]any)
				image, _ := cm["image"].(string)
				command, _, _ := unstructured.NestedStringSlice(cm, "command")
				if len(command) == 0 {
					continue
				}
				program := path.Join("/", command[0])
				if !strings.Contains(command[0], "/") {
					program = path.Join("/usr/local/bin", command[0])
				}
				if !slices.Contains(out[image], program) {
					out[image] = append(out[image], program)
				}
			}
		}
	}
	return out
}
