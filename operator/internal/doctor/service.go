package doctor

import (
	"context"
	"fmt"
	"net"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// endpoint is one ready backend of the webhook Service.
type endpoint struct {
	address string
	port    int32
	pod     string // the Pod behind it, if the EndpointSlice names one
}

func (e endpoint) hostPort() string {
	return net.JoinHostPort(e.address, strconv.Itoa(int(e.port)))
}

// webhookPort is the Service port the webhooks call (the API's default is 443).
func webhookPort(ref *admissionregistrationv1.ServiceReference) int32 {
	if ref.Port == nil {
		return 443
	}
	return *ref.Port
}

// checkService checks that every webhook's clientConfig.service names the release's webhook
// Service and a port it has, and that the Service exists.
func checkService(ctx context.Context, s *session) outcome {
	key := client.ObjectKey{Namespace: s.opts.Namespace, Name: s.serviceName}
	title := fmt.Sprintf("webhooks call Service %s, which exists", key)
	port := int32(443)
	portSeen := false
	for _, w := range s.webhooks() {
		ref := w.clientConfig.Service
		if ref == nil {
			url := ""
			if w.clientConfig.URL != nil {
				url = *w.clientConfig.URL
			}
			return failure(title, undocumented(
				fmt.Sprintf("webhook %s calls URL %q instead of Service %s", w.name, url, key), s.fix.reinstall()))
		}
		if ref.Namespace != key.Namespace || ref.Name != key.Name {
			return failure(title, undocumented(
				fmt.Sprintf("webhook %s calls Service %s/%s, but the operator serves behind Service %s (its certificate is for %s)",
					w.name, ref.Namespace, ref.Name, key, s.serviceHost()),
				s.fix.reinstall()))
		}
		p := webhookPort(ref)
		if portSeen && p != port {
			return failure(title, undocumented(
				fmt.Sprintf("webhooks call Service %s on different ports (%d and %d)", key, port, p), s.fix.reinstall()))
		}
		port, portSeen = p, true
	}

	var svc corev1.Service
	if err := s.client.Get(ctx, key, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return failure(title, documented(t8, fmt.Sprintf("Service %s not found", key), s.fix.reinstall()))
		}
		return failure(title, readError("getting Service "+key.String(), err))
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			s.service, s.servicePort = &svc, p
			return pass(title, fmt.Sprintf("Service %s: type %s, clusterIP %s, port %d -> targetPort %s",
				key, svc.Spec.Type, svc.Spec.ClusterIP, p.Port, p.TargetPort.String()))
		}
	}
	return failure(title, undocumented(
		fmt.Sprintf("Service %s has no port %d, the port the webhooks call", key, port), s.fix.reinstall()))
}

// checkEndpoints checks that the Service has ready endpoints for the webhook port, from its
// EndpointSlices; with none published at all (a process node in host-network mode publishes
// none), from the ready Pods its selector matches.
func checkEndpoints(ctx context.Context, s *session) outcome {
	key := client.ObjectKey{Namespace: s.opts.Namespace, Name: s.serviceName}
	title := fmt.Sprintf("Service %s has ready endpoints for port %d", key, s.servicePort.Port)
	var slices discoveryv1.EndpointSliceList
	if err := s.client.List(ctx, &slices, client.InNamespace(key.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: key.Name}); err != nil {
		return failure(title, readError("listing EndpointSlices of Service "+key.String(), err))
	}
	var details []string
	var ready []endpoint
	notReady := 0
	if len(slices.Items) > 0 {
		for _, sl := range slices.Items {
			port, ok := slicePort(sl, s.servicePort.Name)
			if !ok {
				continue
			}
			for _, ep := range sl.Endpoints {
				if len(ep.Addresses) == 0 {
					continue
				}
				if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
					notReady++
					continue
				}
				e := endpoint{address: ep.Addresses[0], port: port}
				if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
					e.pod = ep.TargetRef.Name
				}
				ready = append(ready, e)
			}
		}
		details = append(details, fmt.Sprintf("%d EndpointSlices: %d ready and %d not ready endpoints for port %q",
			len(slices.Items), len(ready), notReady, s.servicePort.Name))
	} else {
		eps, err := s.readyPodsBehind(ctx)
		if err != nil {
			return failure(title, readError("listing the Pods behind Service "+key.String(), err))
		}
		ready = eps
		details = append(details, fmt.Sprintf("no EndpointSlices published for Service %s (a process node in host-network mode publishes none): %d ready Pods match its selector",
			key, len(ready)))
	}
	for _, e := range ready {
		details = append(details, fmt.Sprintf("ready endpoint %s (pod %s)", e.hostPort(), e.pod))
	}
	if len(ready) > 0 {
		s.endpoints = ready
		return pass(title, details...)
	}
	details = append(details, s.podSummaries(ctx)...)
	return failure(title, s.operatorDownCause(key.String()), details...)
}

// operatorDownCause names T6 when any validating webhook calling the Service fails closed (its
// calls are refused, which is what a user meets first), T7 when every one admits unjudged
// (failurePolicy Ignore).
func (s *session) operatorDownCause(service string) cause {
	var ignoring, failing []string
	for _, w := range s.webhooks() {
		switch {
		case w.mutating:
		case w.failurePolicy == admissionregistrationv1.Ignore:
			ignoring = append(ignoring, w.name)
		default:
			failing = append(failing, w.name)
		}
	}
	sc := t6
	if len(ignoring) > 0 && len(failing) == 0 {
		sc = t7
	}
	found := fmt.Sprintf("Service %s has no ready endpoints", service)
	if d := s.deployment; d != nil {
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		found += fmt.Sprintf(": Deployment %s/%s has %d replicas desired, %d ready", d.Namespace, d.Name, want, d.Status.ReadyReplicas)
	}
	if len(ignoring) > 0 {
		found += fmt.Sprintf(" (failurePolicy Ignore on %s: what they judge is admitted unjudged)", s.webhookList(ignoring))
	}
	if d := s.deployment; d != nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
		return documented(sc, found, fmt.Sprintf("kubectl -n %s scale deployment/%s --replicas=1 && kubectl -n %s rollout status deployment/%s   # or the replica count its chart sets",
			d.Namespace, d.Name, d.Namespace, d.Name))
	}
	return documented(sc, found, s.fix.describePods(), s.fix.logs()+" --previous   # why it crashed",
		fmt.Sprintf("kubectl -n %s rollout status %s", s.opts.Namespace, s.fix.deploymentRef()))
}

// slicePort resolves the Service port name in an EndpointSlice.
func slicePort(sl discoveryv1.EndpointSlice, name string) (int32, bool) {
	for _, p := range sl.Ports {
		pn := ""
		if p.Name != nil {
			pn = *p.Name
		}
		if pn == name && p.Port != nil {
			return *p.Port, true
		}
	}
	return 0, false
}

// readyPodsBehind lists the ready Pods the Service's selector matches, as endpoints.
func (s *session) readyPodsBehind(ctx context.Context) ([]endpoint, error) {
	if len(s.service.Spec.Selector) == 0 {
		return nil, nil
	}
	var pods corev1.PodList
	if err := s.client.List(ctx, &pods, client.InNamespace(s.opts.Namespace), client.MatchingLabels(s.service.Spec.Selector)); err != nil {
		return nil, err
	}
	var out []endpoint
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || !podReady(&p) || p.Status.PodIP == "" {
			continue
		}
		port, ok := containerPort(&p, s.servicePort)
		if !ok {
			continue
		}
		out = append(out, endpoint{address: p.Status.PodIP, port: port, pod: p.Name})
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerPort resolves a Service port's targetPort (number or name) in a Pod.
func containerPort(p *corev1.Pod, sp corev1.ServicePort) (int32, bool) {
	tp := sp.TargetPort
	if tp.StrVal == "" {
		return targetPortNumber(sp), true
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == tp.StrVal {
				return cp.ContainerPort, true
			}
		}
	}
	return 0, false
}

// operatorPods lists the Pods of the operator Deployment.
func (s *session) operatorPods(ctx context.Context) ([]corev1.Pod, error) {
	if s.deployment == nil || s.deployment.Spec.Selector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s.deployment.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("invalid selector in Deployment %s/%s: %w", s.deployment.Namespace, s.deployment.Name, err)
	}
	var pods corev1.PodList
	if err := s.client.List(ctx, &pods, client.InNamespace(s.opts.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing the Pods of Deployment %s/%s: %w", s.deployment.Namespace, s.deployment.Name, err)
	}
	return pods.Items, nil
}

// podSummaries says, per operator Pod, why it is not serving.
func (s *session) podSummaries(ctx context.Context) []string {
	pods, err := s.operatorPods(ctx)
	if err != nil {
		return []string{err.Error()}
	}
	if s.deployment != nil && len(pods) == 0 {
		return []string{fmt.Sprintf("Deployment %s/%s has no Pods", s.deployment.Namespace, s.deployment.Name)}
	}
	var out []string
	for _, p := range pods {
		line := fmt.Sprintf("pod %s: phase %s, ready %t", p.Name, p.Status.Phase, podReady(&p))
		for _, cs := range p.Status.ContainerStatuses {
			line += fmt.Sprintf(", container %s restarts %d", cs.Name, cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				line += fmt.Sprintf(" waiting (%s: %s)", w.Reason, w.Message)
			}
		}
		out = append(out, line)
	}
	return out
}
