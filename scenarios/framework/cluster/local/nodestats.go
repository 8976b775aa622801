package local

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// nodeAddress is the process node's only address (its InternalIP), where its kubelet API
// listens: the API server's node proxy refuses it as loopback ("address not allowed").
const nodeAddress = "127.0.0.1"

// NodeStats reads the kubelet Summary API (GET /stats/summary) of node straight from the
// process node's kubelet API, authenticated as kube-apiserver is: the API server's node proxy,
// the way on other providers, refuses the node's loopback address. The node's serving
// certificate is verified against the one it wrote into its state directory.
func (p *Provider) NodeStats(ctx context.Context, node string) (*statsv1alpha1.Summary, error) {
	cfg, err := p.Config()
	if err != nil {
		return nil, err
	}
	if node != cfg.NodeName() {
		return nil, fmt.Errorf("node %s is not in local cluster %s: its one node is %s", node, cfg.Name, cfg.NodeName())
	}
	client, err := kubeletClient(newLayout(p.name))
	if err != nil {
		return nil, fmt.Errorf("getting the stats summary of node %s: %w", node, err)
	}
	defer client.CloseIdleConnections() // a client per call: its connection must not outlive it
	url := "https://" + net.JoinHostPort(nodeAddress, strconv.Itoa(cfg.Ports.Kubelet)) + "/stats/summary"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("getting the stats summary of node %s from its kubelet API: %w", node, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("getting the stats summary of node %s from its kubelet API: GET %s: HTTP %d: %s", node, url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var summary statsv1alpha1.Summary
	if err := json.NewDecoder(resp.Body).Decode(&summary); err != nil {
		return nil, fmt.Errorf("decoding the stats summary of node %s (GET %s): %w", node, url, err)
	}
	return &summary, nil
}

// kubeletClient talks to the node's kubelet API with kube-apiserver's client certificate,
// trusting only the node's own serving certificate.
func kubeletClient(l layout) (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(l.kubeletClientCert(), l.kubeletClientKey())
	if err != nil {
		return nil, fmt.Errorf("loading the API server's kubelet client certificate: %w", err)
	}
	serving, err := os.ReadFile(l.kubeletServingCert())
	if err != nil {
		return nil, fmt.Errorf("reading the node's kubelet serving certificate (is the node running?): %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(serving) {
		return nil, fmt.Errorf("the node's kubelet serving certificate %s holds no PEM certificate", l.kubeletServingCert())
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12,
	}}}, nil
}
