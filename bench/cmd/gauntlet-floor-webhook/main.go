// Command gauntlet-floor-webhook is the floor of the bench's apiserver/floor
// ladder: an admission webhook that does as little as a webhook can. It reads
// the AdmissionReview's uid (and name), never decodes the object, and answers
// allowed. A dry-run create through the API server that passes it costs the
// API server's webhook machinery, the Service hop, TLS and one HTTP round
// trip, and nothing else; the bench states the operator's admission overhead
// as a multiple of that.
//
//	gauntlet-floor-webhook [--port 9443] [--cert-dir /tls] [--probe-port 8081] [--patch JSON] [--ip-san IP]
//
// It serves HTTPS on --port with tls.crt and tls.key from --cert-dir, read
// once at start (the bench's floor lives no longer than its certificate), and
// plain HTTP GET /healthz on --probe-port for the readiness probe. With
// --ip-san (the pod's address, from the downward API) it serves instead a
// certificate it issues at start from the CA in --cert-dir (ca.crt, ca.key)
// for tls.crt's DNS names and that address, so that a url: webhook can call
// the pod at its address, bypassing the Service, and still trust it. Every POST,
// whatever its path, is an admission review; one POSTed to /mutate-patching is
// answered with the JSON patch --patch gives, when it gives one: the patching
// floor, which returns what the benchmarked mutating webhook returns (for the
// bench, the operator's origin-version annotation), so that the API server's
// cost of applying a patch is on both sides of a comparison. A review of an object named
// "floor-probe-…" is answered with the warning "gauntlet floor webhook", which
// the API server passes on to the client: how an installer proves that a
// namespace is routed through the floor. No other answer carries a warning, so
// the measured requests do no extra work. SIGTERM or SIGINT shuts it down.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
)

// floorProbePrefix starts the names of the objects an installer probes the
// floor with; reviews of them get floorWarning.
const floorProbePrefix = "floor-probe-"

// floorWarning is the warning a probe's review is answered with.
const floorWarning = "gauntlet floor webhook"

// patchingPath is where reviews are answered with --patch.
const patchingPath = "/mutate-patching"

// maxRequestBytes bounds an admission review's body: the operator's limit
// (controller-runtime's: two objects of at most 3 MiB, plus 1 MiB for the
// rest), so that both servers refuse the same requests.
const maxRequestBytes = 7 << 20

// The servers' bounds. The webhook server keeps idle connections longer than
// the API server does (90 s), as the operator's does, so the API server always
// closes an idle connection first and never sends a request on one the floor
// is closing.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 120 * time.Second
	shutdownTimeout   = 10 * time.Second
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gauntlet-floor-webhook:", err)
		os.Exit(1)
	}
}

// run parses the flags, loads the serving certificate, listens on both ports
// and serves until ctx ends.
func run(ctx context.Context, args []string, log io.Writer) error {
	fs := flag.NewFlagSet("gauntlet-floor-webhook", flag.ContinueOnError)
	fs.SetOutput(log)
	port := fs.Int("port", 9443, "HTTPS port of the admission webhook")
	certDir := fs.String("cert-dir", "/tls", "directory holding the serving certificate (tls.crt) and key (tls.key)")
	probePort := fs.Int("probe-port", 8081, "plain HTTP port serving GET /healthz")
	patch := fs.String("patch", "", "JSON patch (an array of operations) answering every review POSTed to "+patchingPath+"; empty: none")
	ipSAN := fs.String("ip-san", "", "serve a certificate issued at start from ca.crt and ca.key in --cert-dir for tls.crt's DNS names and this IP address; empty: tls.crt as it is")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every setting is a flag (see --help)", fs.Args())
	}
	if err := validPatch(*patch); err != nil {
		return err
	}
	cert, err := servingCertificate(*certDir, *ipSAN)
	if err != nil {
		return err
	}
	webhookLn, err := net.Listen("tcp", ":"+strconv.Itoa(*port))
	if err != nil {
		return fmt.Errorf("listening for admission reviews (--port): %w", err)
	}
	probeLn, err := net.Listen("tcp", ":"+strconv.Itoa(*probePort))
	if err != nil {
		_ = webhookLn.Close() // the probe port's error is the one to report
		return fmt.Errorf("listening for health probes (--probe-port): %w", err)
	}
	_, _ = fmt.Fprintf(log, "serving on :%d (health probes on :%d)\n", *port, *probePort)
	return serve(ctx, webhookLn, probeLn, &cert, []byte(*patch))
}

// servingCertificate is tls.crt and tls.key of certDir, or with ipSAN a
// certificate for tls.crt's DNS names and ipSAN issued by the CA of certDir
// (ca.crt, ca.key).
func servingCertificate(certDir, ipSAN string) (tls.Certificate, error) {
	certFile, keyFile := filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("loading the serving certificate %s and key %s (set --cert-dir): %w", certFile, keyFile, err)
	}
	if ipSAN == "" {
		return cert, nil
	}
	ip := net.ParseIP(ipSAN)
	if ip == nil {
		return tls.Certificate{}, fmt.Errorf("--ip-san %q is not an IP address", ipSAN)
	}
	caFile, caKeyFile := filepath.Join(certDir, "ca.crt"), filepath.Join(certDir, "ca.key")
	caPEM, err := os.ReadFile(caFile) //nolint:gosec // G304: the CA of the certificate directory the operator of the floor chose
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--ip-san needs the CA that signs tls.crt: %w", err)
	}
	caKeyPEM, err := os.ReadFile(caKeyFile) //nolint:gosec // G304: as above
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--ip-san needs the CA's key to issue a certificate for %s: %w", ipSAN, err)
	}
	ca, err := pki.LoadCertificateAuthority(caPEM, caKeyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--ip-san: the CA of %s: %w", certDir, err)
	}
	sc, err := ca.Issue(pki.LeafOptions{DNSNames: cert.Leaf.DNSNames, IPAddresses: []net.IP{ip}})
	if err != nil {
		return tls.Certificate{}, err
	}
	issued, err := tls.X509KeyPair(sc.CertPEM, sc.KeyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("the certificate issued for %s: %w", ipSAN, err)
	}
	return issued, nil
}

// validPatch checks that patch is empty or a JSON array of operations, each
// with an op and a path: the API server refuses anything else, and every
// measured request would fail.
func validPatch(patch string) error {
	if patch == "" {
		return nil
	}
	var ops []struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	}
	if err := json.Unmarshal([]byte(patch), &ops); err != nil {
		return fmt.Errorf("--patch %q is not a JSON patch (an array of operations): %w", patch, err)
	}
	for i, op := range ops {
		if op.Op == "" || op.Path == "" {
			return fmt.Errorf("--patch %q: operation %d has no op or no path", patch, i+1)
		}
	}
	return nil
}

// serve answers admission reviews over TLS on webhookLn (those to
// patchingPath with patch, when not empty) and health probes on probeLn until
// ctx ends or a server fails, then shuts both down, letting requests in flight
// finish.
func serve(ctx context.Context, webhookLn, probeLn net.Listener, cert *tls.Certificate, patch []byte) error {
	webhook := &http.Server{
		Handler:           admitter{patch: patch},
		TLSConfig:         serverTLS(cert),
		Protocols:         http1Only(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    1 << 20,
	}
	probes := &http.Server{
		Handler:           http.HandlerFunc(healthz),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    1 << 20,
	}
	failed := make(chan error, 2)
	go func() { failed <- fmt.Errorf("admission webhook server: %w", webhook.ServeTLS(webhookLn, "", "")) }()
	go func() { failed <- fmt.Errorf("health probe server: %w", probes.Serve(probeLn)) }()

	var served error
	select {
	case <-ctx.Done():
	case served = <-failed:
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	return errors.Join(served,
		shutdown(shutdownCtx, "admission webhook server", webhook),
		shutdown(shutdownCtx, "health probe server", probes))
}

func shutdown(ctx context.Context, name string, s *http.Server) error {
	if err := s.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutting down the %s: %w", name, err)
	}
	return nil
}

// serverTLS is the operator's TLS policy as far as the API server can tell:
// TLS 1.2 or later and HTTP/1.1 only, so the API server speaks to the floor
// as it speaks to the operator.
func serverTLS(cert *tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{*cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}
}

// http1Only keeps net/http from offering HTTP/2, which it otherwise adds to the
// TLS configuration's protocols.
func http1Only() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	return &p
}

// admissionReview is the part of an AdmissionReview the floor reads: the
// object stays undecoded.
type admissionReview struct {
	Request *struct {
		UID  string `json:"uid"`
		Name string `json:"name"`
	} `json:"request"`
}

// reviewResponse is an admission.k8s.io/v1 AdmissionReview carrying a response.
type reviewResponse struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Response   admissionResponse `json:"response"`
}

type admissionResponse struct {
	UID       string   `json:"uid"`
	Allowed   bool     `json:"allowed"`
	PatchType string   `json:"patchType,omitempty"`
	Patch     []byte   `json:"patch,omitempty"` // encoded base64, as the API expects
	Warnings  []string `json:"warnings,omitempty"`
}

// admitter answers every POST allowed, with the review's uid, and those to
// patchingPath with patch when it is not empty; see the package
// documentation.
type admitter struct {
	patch []byte
}

func (a admitter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(w, http.StatusMethodNotAllowed, r.Method+" is not served: admission reviews are POSTed")
		return
	}
	var review admissionReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(&review); err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: the limit is %d bytes", int64(maxRequestBytes)))
			return
		}
		refuse(w, http.StatusBadRequest, "the request body is not a JSON AdmissionReview: "+err.Error())
		return
	}
	if review.Request == nil || review.Request.UID == "" {
		refuse(w, http.StatusBadRequest, "the AdmissionReview has no request.uid: the answer could not name the request it answers")
		return
	}
	resp := reviewResponse{
		APIVersion: "admission.k8s.io/v1",
		Kind:       "AdmissionReview",
		Response:   admissionResponse{UID: review.Request.UID, Allowed: true},
	}
	if len(a.patch) > 0 && r.URL.Path == patchingPath {
		resp.Response.PatchType, resp.Response.Patch = "JSONPatch", a.patch
	}
	if strings.HasPrefix(review.Request.Name, floorProbePrefix) {
		resp.Response.Warnings = []string{floorWarning}
	}
	body, err := json.Marshal(resp)
	if err != nil {
		refuse(w, http.StatusInternalServerError, "encoding the AdmissionReview response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body) // a client that went away has nothing left to tell
}

// healthz answers GET /healthz with 200 ok, and 404 to anything else.
func healthz(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/healthz" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok")
}

// refuse answers code with reason as a one-line plain-text body.
func refuse(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, reason+"\n") //nolint:gosec // G705: text/plain with nosniff, never rendered as HTML
}
