package procnode

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// podNetwork gives pods their addresses.
type podNetwork interface {
	// addPod prepares the pod's network and returns its IP and the network namespace file
	// its processes join (empty: the host network).
	addPod(uid string) (ip, netnsPath string, err error)
	// removePod releases what addPod made; unknown uids are ignored.
	removePod(uid string) error
	// hostIP is the node-side address pods use to reach the host (the bridge address).
	hostIP() string
	// close removes everything the network made on the host.
	close() error
}

// hostNetwork is the fallback without root: every pod shares the host's network.
type hostNetwork struct{}

func (hostNetwork) addPod(string) (string, string, error) { return "127.0.0.1", "", nil }
func (hostNetwork) removePod(string) error                { return nil }
func (hostNetwork) hostIP() string                        { return "127.0.0.1" }
func (hostNetwork) close() error                          { return nil }

// bridgeNetwork does what a bridge CNI plugin with host-local IPAM does: one Linux bridge
// holding the first address of the pod CIDR, and per pod a network namespace joined to the
// bridge by a veth pair, with the next free address and a default route via the bridge.
type bridgeNetwork struct {
	nodeName   string
	bridgeName string
	// forward accepts the traffic between the bridge's pods where the host's firewall judges
	// bridged frames.
	forward bridgeForwardRule
	cidr    *net.IPNet
	gateway net.IP
	// nsDir holds one bind-mounted namespace file per pod. It is a mount point of its own
	// so pod inits can detach it from their private mount namespaces; otherwise every pod
	// would pin the namespaces of all pods created before it.
	nsDir string

	mu        sync.Mutex
	allocated map[string]net.IP // uid → ip
	used      map[string]bool   // ip → in use
}

// newBridgeNetwork creates the bridge (replacing a leftover of the same name), the namespace
// directory, and the firewall rule that lets the bridge's pods reach each other (firewall.go).
func newBridgeNetwork(nodeName, bridgeName string, cidr *net.IPNet, stateDir string) (*bridgeNetwork, error) {
	ones, bits := cidr.Mask.Size()
	if bits != 32 || ones > 30 {
		return nil, fmt.Errorf("pod CIDR %s: need an IPv4 range of at least 4 addresses", cidr)
	}
	n := &bridgeNetwork{
		nodeName:   nodeName,
		bridgeName: bridgeName,
		forward:    bridgeForwardRule{nodeName: nodeName, bridgeName: bridgeName},
		cidr:       cidr,
		gateway:    nthIP(cidr, 1),
		nsDir:      filepath.Join(stateDir, "netns"),
		allocated:  map[string]net.IP{},
		used:       map[string]bool{},
	}
	// A daemon that was killed leaves its bridge and veths behind; start from scratch.
	if err := n.removeLinks(); err != nil {
		return nil, fmt.Errorf("removing leftovers of a previous run: %w", err)
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}}
	if err := netlink.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("creating bridge %s: %w", bridgeName, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: n.gateway, Mask: cidr.Mask}}
	if err := netlink.AddrAdd(br, addr); err != nil {
		_ = netlink.LinkDel(br)
		return nil, fmt.Errorf("adding %s to bridge %s: %w", addr.IPNet, bridgeName, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		_ = netlink.LinkDel(br)
		return nil, fmt.Errorf("bringing up bridge %s: %w", bridgeName, err)
	}
	if err := n.mountNSDir(); err != nil {
		_ = netlink.LinkDel(br)
		return nil, err
	}
	if err := n.forward.insert(); err != nil {
		n.unmountNSDir()
		_ = netlink.LinkDel(br)
		return nil, err
	}
	return n, nil
}

func (n *bridgeNetwork) mountNSDir() error {
	n.unmountNSDir() // a leftover from a daemon that was killed
	if err := os.MkdirAll(n.nsDir, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", n.nsDir, err)
	}
	if err := unix.Mount(n.nsDir, n.nsDir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s on itself: %w", n.nsDir, err)
	}
	if err := unix.Mount("", n.nsDir, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making %s a private mount: %w", n.nsDir, err)
	}
	return nil
}

func (n *bridgeNetwork) unmountNSDir() {
	entries, _ := os.ReadDir(n.nsDir)
	for _, e := range entries {
		p := filepath.Join(n.nsDir, e.Name())
		_ = unix.Unmount(p, unix.MNT_DETACH)
		_ = os.Remove(p)
	}
	_ = unix.Unmount(n.nsDir, unix.MNT_DETACH)
}

func (n *bridgeNetwork) hostIP() string { return n.gateway.String() }

func (n *bridgeNetwork) addPod(uid string) (string, string, error) {
	ip, err := n.allocate(uid)
	if err != nil {
		return "", "", err
	}
	nsPath := filepath.Join(n.nsDir, uid)
	if err := createNetns(nsPath); err != nil {
		n.release(uid)
		return "", "", fmt.Errorf("creating network namespace for pod %s: %w", uid, err)
	}
	if err := n.connect(uid, nsPath, ip); err != nil {
		_ = n.removePod(uid)
		return "", "", fmt.Errorf("connecting pod %s to bridge %s: %w", uid, n.bridgeName, err)
	}
	return ip.String(), nsPath, nil
}

// connect creates the veth pair with its pod end directly inside the namespace, then
// configures the pod end from a netlink handle bound to that namespace.
func (n *bridgeNetwork) connect(uid, nsPath string, ip net.IP) error {
	br, err := netlink.LinkByName(n.bridgeName)
	if err != nil {
		return fmt.Errorf("finding bridge: %w", err)
	}
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("opening %s: %w", nsPath, err)
	}
	defer func() { _ = ns.Close() }() // the handle only; the namespace lives on at nsPath

	hostEnd, podEnd := vethNames(n.nodeName, uid)
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: hostEnd, MasterIndex: br.Attrs().Index},
		PeerName:      podEnd,
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth %s: %w", hostEnd, err)
	}
	host, err := netlink.LinkByName(hostEnd)
	if err != nil {
		return fmt.Errorf("finding veth %s: %w", hostEnd, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("bringing up veth %s: %w", hostEnd, err)
	}

	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("opening netlink in %s: %w", nsPath, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo in the pod namespace: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bringing up lo in the pod namespace: %w", err)
	}
	pod, err := h.LinkByName(podEnd)
	if err != nil {
		return fmt.Errorf("finding %s in the pod namespace: %w", podEnd, err)
	}
	if err := h.LinkSetName(pod, "eth0"); err != nil {
		return fmt.Errorf("renaming %s to eth0: %w", podEnd, err)
	}
	if err := h.LinkSetHardwareAddr(pod, podMAC(ip)); err != nil {
		return fmt.Errorf("setting eth0's MAC to %s: %w", podMAC(ip), err)
	}
	if err := h.AddrAdd(pod, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: n.cidr.Mask}}); err != nil {
		return fmt.Errorf("adding %s to eth0: %w", ip, err)
	}
	if err := h.LinkSetUp(pod); err != nil {
		return fmt.Errorf("bringing up eth0: %w", err)
	}
	route := &netlink.Route{LinkIndex: pod.Attrs().Index, Gw: n.gateway}
	if err := h.RouteAdd(route); err != nil {
		return fmt.Errorf("adding default route via %s: %w", n.gateway, err)
	}
	return nil
}

func (n *bridgeNetwork) removePod(uid string) error {
	var errs []error
	hostEnd, _ := vethNames(n.nodeName, uid)
	// Deleting the host end removes the pair even while something still pins the namespace.
	if link, err := netlink.LinkByName(hostEnd); err == nil {
		if err := netlink.LinkDel(link); err != nil {
			errs = append(errs, fmt.Errorf("deleting veth %s: %w", hostEnd, err))
		}
	}
	nsPath := filepath.Join(n.nsDir, uid)
	if err := unix.Unmount(nsPath, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		errs = append(errs, fmt.Errorf("unmounting %s: %w", nsPath, err))
	}
	if err := os.Remove(nsPath); err != nil && !os.IsNotExist(err) {
		errs = append(errs, fmt.Errorf("removing %s: %w", nsPath, err))
	}
	n.release(uid)
	return errors.Join(errs...)
}

func (n *bridgeNetwork) close() error {
	n.mu.Lock()
	uids := make([]string, 0, len(n.allocated))
	for uid := range n.allocated {
		uids = append(uids, uid)
	}
	n.mu.Unlock()
	var errs []error
	for _, uid := range uids {
		errs = append(errs, n.removePod(uid))
	}
	n.unmountNSDir()
	if err := os.Remove(n.nsDir); err != nil && !os.IsNotExist(err) {
		errs = append(errs, fmt.Errorf("removing %s: %w", n.nsDir, err))
	}
	errs = append(errs, n.forward.remove(), n.removeLinks())
	return errors.Join(errs...)
}

// removeLinks deletes the node's bridge and every host-side veth carrying its prefix.
func (n *bridgeNetwork) removeLinks() error { return removeNodeLinks(n.nodeName, n.bridgeName) }

// removeNodeLinks deletes node nodeName's bridge and host-side veths.
func removeNodeLinks(nodeName, bridgeName string) error {
	links, err := nodeLinks(nodeName, bridgeName)
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range links {
		if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("deleting link %s: %w", l.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}

// allocate hands out the lowest free address after the gateway.
func (n *bridgeNetwork) allocate(uid string) (net.IP, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ip, ok := n.allocated[uid]; ok {
		return ip, nil
	}
	ones, bits := n.cidr.Mask.Size()
	size := uint64(1) << (bits - ones)
	for i := uint32(2); uint64(i) < size-1; i++ {
		ip := nthIP(n.cidr, i)
		if !n.used[ip.String()] {
			n.used[ip.String()] = true
			n.allocated[uid] = ip
			return ip, nil
		}
	}
	return nil, fmt.Errorf("pod CIDR %s is exhausted", n.cidr)
}

func (n *bridgeNetwork) release(uid string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ip, ok := n.allocated[uid]; ok {
		delete(n.used, ip.String())
		delete(n.allocated, uid)
	}
}

// nthIP is the i-th address of an IPv4 network.
func nthIP(cidr *net.IPNet, i uint32) net.IP {
	base := binary.BigEndian.Uint32(cidr.IP.To4())
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, base+i)
	return ip
}

// podMAC is the MAC of the pod whose address is ip: 0a:58 (locally administered, as the CNI
// bridge plugin's once were) and the four bytes of the address. Addresses are handed out again
// as soon as a pod is gone, and the host's and pods' neighbour caches keep an address's MAC
// for up to a minute: were it random, a new pod on a reused address would be unreachable
// meanwhile (the frames go to the departed pod's MAC).
func podMAC(ip net.IP) net.HardwareAddr {
	return append(net.HardwareAddr{0x0a, 0x58}, ip.To4()...)
}

// vethNames derives interface names (15 bytes, the kernel's limit) from the node and pod:
// "gv" + 4 hex of the node name's hash + 9 hex of the pod uid's hash, so every host-side
// veth of one node shares the prefix vethPrefix(nodeName).
func vethNames(nodeName, uid string) (hostEnd, podEnd string) {
	sum := sha256.Sum256([]byte(uid))
	h := hex.EncodeToString(sum[:])[:9]
	return vethPrefix(nodeName) + h, "gp" + vethPrefix(nodeName)[2:] + h
}

// vethPrefix is the name prefix of a node's host-side veths.
func vethPrefix(nodeName string) string {
	sum := sha256.Sum256([]byte(nodeName))
	return "gv" + hex.EncodeToString(sum[:])[:4]
}

// bridgeNameFor derives the default bridge name from the node name.
func bridgeNameFor(nodeName string) string {
	sum := sha256.Sum256([]byte(nodeName))
	return "gn-" + hex.EncodeToString(sum[:])[:8]
}

// createNetns makes a new network namespace and bind-mounts it at path. It runs on a
// dedicated OS thread that is never returned to the Go scheduler: the thread's namespace
// changes, so it must die with the goroutine.
func createNetns(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444) //nolint:gosec // G304: the pod's netns path under the node's namespace dir
	if err != nil {
		return err
	}
	_ = f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind-mounting %s at %s: %w", src, path, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}
