package procnode

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// startBinder binds pods that no scheduler has looked at. With kube-scheduler running,
// pods are bound (or marked Unschedulable) within milliseconds and the binder never acts;
// without one, pods would stay Pending forever.
func (n *node) startBinder(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(n.client, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
		}))
	pods := factory.Core().V1().Pods()
	schedule := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !needsBinding(pod) {
			return
		}
		time.AfterFunc(n.cfg.BindUnscheduledAfter, func() { n.bind(ctx, pod.Namespace, pod.Name, pod.UID) })
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    schedule,
		UpdateFunc: func(_, obj any) { schedule(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	return nil
}

// needsBinding: unbound, not being deleted, and without any PodScheduled condition (a
// scheduler that found no fit sets it to False; we leave such pods alone).
func needsBinding(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return false
		}
	}
	return true
}

func (n *node) bind(ctx context.Context, ns, name string, uid types.UID) {
	if ctx.Err() != nil {
		return
	}
	pod, err := n.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || pod.UID != uid || !needsBinding(pod) {
		return
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.cfg.NodeName},
	}
	err = n.client.CoreV1().Pods(ns).Bind(ctx, binding, metav1.CreateOptions{})
	switch {
	case err == nil:
		klog.InfoS("bound unscheduled pod (no scheduler placed it)", "pod", klog.KRef(ns, name), "after", n.cfg.BindUnscheduledAfter)
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
	default:
		klog.ErrorS(err, "binding pod", "pod", klog.KRef(ns, name))
	}
}
