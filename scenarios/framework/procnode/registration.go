package procnode

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

const (
	nodeLeaseNamespace = "kube-node-lease"
	// Kubelet's defaults: renew the Lease every 10 s (a quarter of its 40 s duration), and
	// post NodeStatus at least every minute.
	leaseDurationSeconds = 40
	leaseRenewInterval   = 10 * time.Second
	statusInterval       = time.Minute
	runtimeVersion       = "gauntlet-node://v1"
)

// hostCapacity is what the node offers: the host's CPUs and memory, kubelet's default
// pod limit, and a nominal ephemeral storage.
func hostCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(hostMemoryBytes(), resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(110, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
}

func hostMemoryBytes() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 8 << 30
	}
	defer func() { _ = f.Close() }() // read only
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
				return kb * 1024
			}
		}
	}
	return 8 << 30
}

// registerNode creates the Node (or adopts a leftover of the same name) and marks it Ready.
func (n *node) registerNode(ctx context.Context) error {
	version := "v0.0.0"
	if info, err := n.client.Discovery().ServerVersion(); err == nil {
		version = info.GitVersion
	}
	n.kubeletVersion = version
	desired := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.cfg.NodeName,
			Labels: map[string]string{
				corev1.LabelHostname:        n.cfg.NodeName,
				corev1.LabelOSStable:        runtime.GOOS,
				corev1.LabelArchStable:      runtime.GOARCH,
				"gauntlet.dev/process-node": "true",
			},
		},
	}
	existing, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := n.client.CoreV1().Nodes().Create(ctx, desired, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Node %s: %w", n.cfg.NodeName, err)
		}
	case err != nil:
		return fmt.Errorf("reading Node %s: %w", n.cfg.NodeName, err)
	default:
		for k, v := range desired.Labels {
			if existing.Labels == nil {
				existing.Labels = map[string]string{}
			}
			existing.Labels[k] = v
		}
		if _, err := n.client.CoreV1().Nodes().Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating Node %s: %w", n.cfg.NodeName, err)
		}
	}
	if err := n.postNodeStatus(ctx, true); err != nil {
		return err
	}
	return n.renewLease(ctx)
}

// postNodeStatus writes the node's status with Ready set to ready.
func (n *node) postNodeStatus(ctx context.Context, ready bool) error {
	return retryOnConflict(func() error {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading Node %s: %w", n.cfg.NodeName, err)
		}
		now := metav1.Now()
		capacity := hostCapacity()
		node.Status.Capacity = capacity
		node.Status.Allocatable = capacity
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.nodeIP}}
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = clampInt32(n.cfg.KubeletPort) // validated as a port
		node.Status.NodeInfo = corev1.NodeSystemInfo{
			MachineID:               n.cfg.NodeName,
			SystemUUID:              n.cfg.NodeName,
			BootID:                  n.bootID,
			KernelVersion:           kernelVersion(),
			OSImage:                 "gauntlet process node",
			ContainerRuntimeVersion: runtimeVersion,
			KubeletVersion:          n.kubeletVersion,
			OperatingSystem:         runtime.GOOS,
			Architecture:            runtime.GOARCH,
		}
		readyStatus, reason, msg := corev1.ConditionTrue, "KubeletReady", "gauntlet-node is posting ready status"
		if !ready {
			readyStatus, reason, msg = corev1.ConditionFalse, "KubeletNotReady", "gauntlet-node stopped"
		}
		setNodeCondition(node, corev1.NodeReady, readyStatus, reason, msg, now)
		setNodeCondition(node, corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "", now)
		setNodeCondition(node, corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "", now)
		setNodeCondition(node, corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "", now)
		if _, err := n.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating status of Node %s: %w", n.cfg.NodeName, err)
		}
		return nil
	})
}

func setNodeCondition(node *corev1.Node, t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string, now metav1.Time) {
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type == t {
			if c.Status != s {
				c.LastTransitionTime = now
			}
			c.Status, c.Reason, c.Message, c.LastHeartbeatTime = s, reason, msg, now
			return
		}
	}
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
		Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now,
	})
}

// renewLease creates or renews the node's Lease, the heartbeat the node lifecycle
// controller watches.
func (n *node) renewLease(ctx context.Context) error {
	leases := n.client.CoordinationV1().Leases(nodeLeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading Node %s for its Lease owner: %w", n.cfg.NodeName, err)
		}
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:      n.cfg.NodeName,
				Namespace: nodeLeaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
				}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(n.cfg.NodeName),
				LeaseDurationSeconds: ptr.To(int32(leaseDurationSeconds)),
				RenewTime:            &now,
			},
		}
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Lease %s/%s: %w", nodeLeaseNamespace, n.cfg.NodeName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Lease %s/%s: %w", nodeLeaseNamespace, n.cfg.NodeName, err)
	}
	lease.Spec.RenewTime = &now
	lease.Spec.HolderIdentity = ptr.To(n.cfg.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(leaseDurationSeconds))
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renewing Lease %s/%s: %w", nodeLeaseNamespace, n.cfg.NodeName, err)
	}
	return nil
}

// heartbeat keeps the Lease and the NodeStatus fresh until ctx ends.
func (n *node) heartbeat(ctx context.Context) {
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := n.renewLease(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "renewing node lease")
		}
	}, leaseRenewInterval)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := n.postNodeStatus(ctx, true); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "posting node status")
		}
	}, statusInterval)
}

func retryOnConflict(fn func() error) error {
	var err error
	for range 5 {
		if err = fn(); err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

func kernelVersion() string {
	raw, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}
