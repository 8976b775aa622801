package kind

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	"sigs.k8s.io/kind/pkg/exec"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// cniConfig is the node image's CNI configuration (kind/node-image/10-ptp.conflist): ptp with
// host-local addresses from the first node's pod range.
const cniConfig = "/etc/cni/net.d/10-ptp.conflist"

// wirePodNetwork does for a cluster with workers what kindnetd (not on the module proxy) does:
// every node hands out addresses from the pod range the controller-manager allocated to it, and
// routes every other node's range to that node over the Docker network. The network fence lets
// exactly those ranges leave a node. (A single node already has what it needs.)
func (p *Provider) wirePodNetwork(ctx context.Context, rc *rest.Config) error {
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	var nodes []corev1.Node
	what := fmt.Sprintf("every node of kind cluster %q to get a pod range and an address", p.name)
	err = poll.Until(ctx, what, time.Minute, func(ctx context.Context) (bool, string, error) {
		list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, n := range list.Items {
			if n.Spec.PodCIDR == "" || internalIP(&n) == "" {
				return false, fmt.Sprintf("node %s has pod range %q, address %q", n.Name, n.Spec.PodCIDR, internalIP(&n)), nil
			}
		}
		nodes = list.Items
		return true, "", nil
	})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		node, err := p.node(n.Name)
		if err != nil {
			return err
		}
		raw, err := exec.Output(node.CommandContext(ctx, "cat", cniConfig))
		if err != nil {
			return fmt.Errorf("reading %s in node %s: %w", cniConfig, n.Name, err)
		}
		conf, err := withPodRange(raw, n.Spec.PodCIDR)
		if err != nil {
			return fmt.Errorf("%s in node %s: %w", cniConfig, n.Name, err)
		}
		if err := nodeutils.WriteFile(node, cniConfig, string(conf)); err != nil {
			return fmt.Errorf("writing %s in node %s: %w", cniConfig, n.Name, err)
		}
		for _, o := range nodes {
			if o.Name == n.Name {
				continue
			}
			for _, args := range [][]string{
				{"ip", "route", "replace", o.Spec.PodCIDR, "via", internalIP(&o)},
				{"iptables", "-t", "mangle", "-I", "POSTROUTING", "1", "-o", "eth0", "-d", o.Spec.PodCIDR, "-j", "ACCEPT"},
			} {
				if out, err := exec.CombinedOutputLines(node.CommandContext(ctx, args[0], args[1:]...)); err != nil {
					return fmt.Errorf("routing pod range %s of node %s in node %s (%s): %w: %s", o.Spec.PodCIDR, o.Name, n.Name, strings.Join(args, " "), err, strings.Join(out, "; "))
				}
			}
		}
	}
	return nil
}

// withPodRange sets the host-local range of a CNI configuration list to cidr.
func withPodRange(raw []byte, cidr string) ([]byte, error) {
	var conf map[string]any
	if err := json.Unmarshal(raw, &conf); err != nil {
		return nil, err
	}
	plugins, _ := conf["plugins"].([]any)
	for _, pl := range plugins {
		if ipam, ok := pl.(map[string]any)["ipam"].(map[string]any); ok && ipam["type"] == "host-local" {
			ipam["ranges"] = []any{[]any{map[string]any{"subnet": cidr}}}
			return json.MarshalIndent(conf, "", "  ")
		}
	}
	return nil, fmt.Errorf("no host-local IPAM to give the range %s", cidr)
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && !strings.Contains(a.Address, ":") {
			return a.Address
		}
	}
	return ""
}
