package procnode

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// logPath is where a container run's stdout and stderr go, laid out like /var/log/pods.
func (n *node) logPath(pod *corev1.Pod, container string, restart int32) string {
	return filepath.Join(n.podLogDir(pod), container, fmt.Sprintf("%d.log", restart))
}

func (n *node) podLogDir(pod *corev1.Pod) string {
	return filepath.Join(n.cfg.StateDir, "logs", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// startKubeletAPI serves the part of the kubelet API the apiserver proxies to for
// `kubectl logs`, over HTTPS with a self-signed certificate (the apiserver skips
// verification when it has no --kubelet-certificate-authority).
func (n *node) startKubeletAPI() (*http.Server, error) {
	dir := filepath.Join(n.cfg.StateDir, "kubelet")
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(n.cfg.NodeName, []net.IP{net.ParseIP(n.nodeIP)}, nil)
	if err != nil {
		return nil, fmt.Errorf("generating kubelet serving certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing kubelet certificate: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing kubelet key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading kubelet serving certificate: %w", err)
	}
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if n.cfg.KubeletClientCA != "" {
		caPEM, err := os.ReadFile(n.cfg.KubeletClientCA)
		if err != nil {
			return nil, fmt.Errorf("reading kubelet client CA %s: %w", n.cfg.KubeletClientCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("kubelet client CA %s holds no PEM certificate", n.cfg.KubeletClientCA)
		}
		tlsConfig.ClientCAs, tlsConfig.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	addr := net.JoinHostPort(n.nodeIP, strconv.Itoa(n.cfg.KubeletPort))
	ln, err := tls.Listen("tcp", addr, tlsConfig)
	if err != nil {
		return nil, fmt.Errorf("listening on %s for the kubelet API: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", n.serveContainerLogs)
	mux.HandleFunc("GET /stats/summary", n.serveStatsSummary)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "kubelet API server stopped")
		}
	}()
	return srv, nil
}

// serveContainerLogs implements GET /containerLogs/{ns}/{pod}/{container} with the query
// parameters kubectl sends: follow, previous, tailLines, limitBytes (timestamps and
// sinceSeconds are accepted and ignored: the files carry raw output).
func (n *node) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	pod, err := n.podLister.Pods(ns).Get(name)
	if err != nil {
		http.Error(w, fmt.Sprintf("pod %s/%s not found on node %s", ns, name, n.cfg.NodeName), http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	dir := filepath.Join(n.podLogDir(pod), container)
	runs := logRuns(dir)
	if len(runs) == 0 {
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start: no logs yet", container, name), http.StatusBadRequest)
		return
	}
	file := runs[len(runs)-1]
	if q.Get("previous") == "true" {
		if len(runs) < 2 {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", container, name), http.StatusBadRequest)
			return
		}
		file = runs[len(runs)-2]
	}
	f, err := os.Open(file) //nolint:gosec // G304: one of this node's container logs, picked from its own list of runs
	if err != nil {
		http.Error(w, fmt.Sprintf("opening log of container %q in pod %s/%s: %v", container, ns, name, err), http.StatusInternalServerError)
		return
	}
	defer func() { _ = f.Close() }() // read only

	var out io.Writer = w
	if lb := q.Get("limitBytes"); lb != "" {
		if limit, err := strconv.ParseInt(lb, 10, 64); err == nil && limit > 0 {
			out = &limitWriter{w: w, left: limit}
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	if tl := q.Get("tailLines"); tl != "" {
		if lines, err := strconv.Atoi(tl); err == nil && lines >= 0 {
			if err := writeTail(out, f, lines); err != nil {
				return
			}
		}
	} else if _, err := io.Copy(out, f); err != nil {
		return
	}
	if q.Get("follow") != "true" || q.Get("previous") == "true" {
		return
	}
	n.followLog(r.Context(), w, out, f, dir, file, pod)
}

// followLog streams what the container writes until the container run ends (a newer log
// file appears or the pod goes away) or the client disconnects.
func (n *node) followLog(ctx context.Context, w http.ResponseWriter, out io.Writer, f *os.File, dir, file string, pod *corev1.Pod) {
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush() // what was already in the file goes out before we wait for more
	}
	buf := make([]byte, 32*1024)
	for {
		nr, err := f.Read(buf)
		if nr > 0 {
			if _, werr := out.Write(buf[:nr]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			continue
		}
		if err != nil && err != io.EOF {
			return
		}
		runs := logRuns(dir)
		if len(runs) > 0 && runs[len(runs)-1] != file {
			return
		}
		if _, err := n.podLister.Pods(pod.Namespace).Get(pod.Name); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// logRuns lists a container's log files, oldest run first.
func logRuns(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type run struct {
		n    int
		path string
	}
	var runs []run
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(base); err == nil {
			runs = append(runs, run{n, filepath.Join(dir, e.Name())})
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].n < runs[j].n })
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.path
	}
	return out
}

// writeTail writes the last lines of r and leaves r at its end (for follow).
func writeTail(w io.Writer, r io.Reader, lines int) error {
	ring := make([][]byte, 0, lines)
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && lines > 0 {
			if len(ring) == lines {
				ring = ring[1:]
			}
			ring = append(ring, bytes.Clone(line))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	for _, l := range ring {
		if _, err := w.Write(l); err != nil {
			return err
		}
	}
	return nil
}

// limitWriter stops writing after a number of bytes (limitBytes).
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, io.ErrShortWrite
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	return n, err
}
