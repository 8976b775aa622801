package certmanager

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager/controllers"
)

// InClusterName names the ServiceAccount, ClusterRoleBinding and controller Deployment of an
// in-cluster cert-manager; the cainjector Deployment is InClusterName-cainjector, as upstream.
const InClusterName = "cert-manager"

// DeployInCluster runs cert-manager inside a cluster the way its chart does: the controllers
// and the cainjector as two Deployments in namespace, both from image (gauntlet-cert-manager,
// already present on the nodes: imagePullPolicy Never), then waits until a probe Issuer is
// Ready. The CRDs must be installed first (InstallCRDs).
func DeployInCluster(ctx context.Context, cfg *rest.Config, namespace, image string, timeout time.Duration) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	labels := map[string]string{"app.kubernetes.io/name": InClusterName, "app.kubernetes.io/managed-by": "gauntlet"}
	objects := []struct {
		what   string
		create func() error
	}{
		{"Namespace " + namespace, func() error {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: labels}}, metav1.CreateOptions{})
			return err
		}},
		{"ServiceAccount " + namespace + "/" + InClusterName, func() error {
			_, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: InClusterName, Labels: labels}}, metav1.CreateOptions{})
			return err
		}},
		// cert-manager's chart grants a dozen ClusterRoles; a test cluster's cert-manager gets
		// cluster-admin, which covers them all.
		{"ClusterRoleBinding " + InClusterName, func() error {
			_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: InClusterName, Labels: labels},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: InClusterName, Namespace: namespace}},
			}, metav1.CreateOptions{})
			return err
		}},
		{"Deployment " + namespace + "/" + InClusterName, func() error {
			_, err := kube.AppsV1().Deployments(namespace).Create(ctx, deployment(InClusterName, namespace, image, controllers.ComponentControllers, labels), metav1.CreateOptions{})
			return err
		}},
		{"Deployment " + namespace + "/" + InClusterName + "-cainjector", func() error {
			_, err := kube.AppsV1().Deployments(namespace).Create(ctx, deployment(InClusterName+"-cainjector", namespace, image, controllers.ComponentCAInjector, labels), metav1.CreateOptions{})
			return err
		}},
	}
	for _, o := range objects {
		if err := o.create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", o.what, err)
		}
	}
	return WaitReady(ctx, cfg, namespace, timeout)
}

func deployment(name, namespace, image, component string, labels map[string]string) *appsv1.Deployment {
	podLabels := map[string]string{"app.kubernetes.io/name": InClusterName, "app.kubernetes.io/component": component}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: InClusterName,
					SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
					Containers: []corev1.Container{{
						Name:            component,
						Image:           image,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"--components=" + component, "--cluster-resource-namespace=" + namespace},
					}},
				},
			},
		},
	}
}
