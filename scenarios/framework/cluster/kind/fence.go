package kind

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/exec"
)

// fenceClusterNetwork keeps every packet for a Service or pod address inside the nodes. A
// node routes what kube-proxy did not rewrite (a Service whose endpoints are changing, an
// address nothing owns) out of its default route, through Docker's NAT, off this machine —
// seen here during rollouts as a TLS answer from a stranger. So in every node:
//   - traffic still addressed to a Service after kube-proxy's DNAT (filter OUTPUT for the
//     node's own processes such as the API server, FORWARD for pods) is rejected, which the
//     caller sees as `connect: connection refused`, as with kube-proxy's reject of a Service
//     without endpoints;
//   - anything for the Service or pod ranges that would still leave through eth0 (the Docker
//     network) is dropped in mangle POSTROUTING, the one hook that sees the interface chosen
//     after DNAT.
func (p *Provider) fenceClusterNetwork(ctx context.Context, c *v1alpha4.Cluster) error {
	nodes, err := p.kind.ListInternalNodes(p.name)
	if err != nil {
		return fmt.Errorf("listing the nodes of kind cluster %q: %w", p.name, err)
	}
	var rules [][]string
	for _, svc := range ipv4Ranges(c.Networking.ServiceSubnet) {
		for _, chain := range []string{"OUTPUT", "FORWARD"} {
			rules = append(rules, []string{"-I", chain, "1", "-d", svc, "-j", "REJECT", "--reject-with", "icmp-port-unreachable"})
		}
	}
	for _, r := range ipv4Ranges(c.Networking.ServiceSubnet + "," + c.Networking.PodSubnet) {
		rules = append(rules, []string{"-t", "mangle", "-I", "POSTROUTING", "1", "-o", "eth0", "-d", r, "-j", "DROP"})
	}
	for _, n := range nodes {
		for _, args := range rules {
			if out, err := exec.CombinedOutputLines(n.CommandContext(ctx, "iptables", args...)); err != nil {
				return fmt.Errorf("fencing the cluster network in node %s (iptables %s): %w: %s", n, strings.Join(args, " "), err, strings.Join(out, "; "))
			}
		}
	}
	return nil
}

// ipv4Ranges lists the IPv4 CIDRs of a comma-separated list (IPv6 ranges need ip6tables;
// kind's default family is IPv4).
func ipv4Ranges(list string) []string {
	var out []string
	for _, r := range strings.Split(list, ",") {
		if r = strings.TrimSpace(r); r != "" && !strings.Contains(r, ":") {
			out = append(out, r)
		}
	}
	return out
}
