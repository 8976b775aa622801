package local

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
)

// Leftovers lists what a deleted cluster left on the host, each as a sentence a person can
// act on: processes (control plane, node agent, pods), mount points, TCP listeners on the
// cluster's ports, Service range or pod-network host address, network interfaces of its pod
// network (the node's bridge and veths), mount targets its node created on the host (and the
// host-wide registry of them in /run), and its state directory. A clean teardown returns
// nothing.
func Leftovers(cfg *Config) []string {
	l := newLayout(cfg.Name)
	var out []string
	if _, err := os.Stat(l.dir); err == nil {
		out = append(out, "state directory "+l.dir+" still exists")
	}
	out = append(out, leftoverProcesses(cfg, l)...)
	for _, m := range mountsUnder(l.dir) {
		out = append(out, "mount point "+m)
	}
	out = append(out, leftoverListeners(cfg)...)
	out = append(out, leftoverInterfaces(cfg)...)
	if !cfg.Node.Disabled {
		out = append(out, procnode.HostLeftovers(cfg.NodeName())...)
	}
	return out
}

// CleanDeleted removes what a cluster whose state directory is gone (deleted, or removed by
// hand after an interrupted run) left on the host, once none of its processes runs: its
// node's links and mount targets. It returns what is still left (Leftovers). Its ports and
// ranges are derived from the name again, as Create derived them: a cluster created from a
// config file with explicit ports is checked on the derived ones only.
func CleanDeleted(name string) ([]string, error) {
	others, err := existingConfigs()
	if err != nil {
		return nil, err
	}
	cfg := &Config{}
	if err := cfg.Complete(name, others); err != nil {
		return nil, err
	}
	if len(leftoverProcesses(cfg, newLayout(name))) == 0 {
		if err := procnode.CleanHost(cfg.NodeName()); err != nil {
			return nil, err
		}
	}
	return Leftovers(cfg), nil
}

// leftoverProcesses finds processes that mention the state directory (control plane, node
// agent, cert-manager) or that carry this cluster's pod environment (pods: the apiserver
// address for pods is unique per cluster).
func leftoverProcesses(cfg *Config, l layout) []string {
	podEnv := []byte("KUBERNETES_SERVICE_HOST=" + cfg.PodHostIP() + "\x00")
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 { // gone, or a kernel thread
			continue
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if bytes.Contains(cmdline, []byte(l.dir)) || strings.HasPrefix(cwd, l.dir) || bytes.Contains(environ, podEnv) {
			if isZombie(pid) { // exited, waiting for its parent to reap it
				continue
			}
			out = append(out, fmt.Sprintf("process %d: %s", pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))))
		}
	}
	return out
}

// isZombie reports whether pid has exited and waits to be reaped (or is gone). The state field
// follows the parenthesised command name in /proc/<pid>/stat.
func isZombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// leftoverListeners reads /proc/net/tcp{,6} for LISTEN sockets on the cluster's addresses.
func leftoverListeners(cfg *Config) []string {
	svc, _ := netip.ParsePrefix(cfg.ServiceCIDR)
	podHost, _ := netip.ParseAddr(cfg.PodHostIP())
	ports := map[int]string{}
	for _, p := range cfg.Ports.named() {
		ports[p.port] = "ports." + p.name
	}
	var out []string
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file) //nolint:gosec // G304: one of the two /proc/net files listed above
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" { // 0A = LISTEN
				continue
			}
			addr, port, ok := parseProcNetAddr(fields[1])
			if !ok {
				continue
			}
			switch {
			case svc.IsValid() && svc.Contains(addr):
				out = append(out, fmt.Sprintf("listener %s:%d in the Service range %s", addr, port, cfg.ServiceCIDR))
			case addr == podHost:
				out = append(out, fmt.Sprintf("listener %s:%d on the pod network's host address", addr, port))
			case ports[port] != "" && (addr.IsLoopback() || addr.IsUnspecified()):
				out = append(out, fmt.Sprintf("listener %s:%d (%s)", addr, port, ports[port]))
			}
		}
		_ = f.Close() // read only
	}
	return out
}

// parseProcNetAddr decodes "0100007F:1F90" (little-endian words) into 127.0.0.1 and 8080.
func parseProcNetAddr(s string) (netip.Addr, int, bool) {
	host, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.Addr{}, 0, false
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.Addr{}, 0, false
	}
	raw, err := hex.DecodeString(host)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.Addr{}, 0, false
	}
	for i := 0; i+4 <= len(raw); i += 4 { // each 32-bit word is in host (little-endian) order
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	addr, _ := netip.AddrFromSlice(raw)
	return addr.Unmap(), int(port), true
}

// leftoverInterfaces finds network interfaces holding a pod-network address. The node's own
// bridge and veths are procnode.HostLeftovers'.
func leftoverInterfaces(cfg *Config) []string {
	pod, _ := netip.ParsePrefix(cfg.PodCIDR)
	ifaces, _ := net.Interfaces()
	var out []string
	for _, iface := range ifaces {
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok && pod.Contains(ip.Unmap()) {
					out = append(out, fmt.Sprintf("network interface %s with pod-network address %s", iface.Name, ipn))
				}
			}
		}
	}
	return out
}
