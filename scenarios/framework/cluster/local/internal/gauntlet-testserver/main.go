// Command gauntlet-testserver is the workload of the local provider's conformance tests: a
// small HTTPS server run as a pod by the process node. Each endpoint exposes one thing a test
// must observe from inside a pod:
//
//	/healthz, /readyz   probes
//	/validate           admission webhook: denies objects labelled gauntlet.dev/deny, naming the
//	                    pod and the TLS server name the caller (the apiserver) asked for
//	/whoami             pod name, namespace, pid and TLS server name, as JSON
//	/snapshot?dir=D     a kubelet-style volume read atomically through its ..data link, as JSON
//	/api?resource=R     lists R in the pod's namespace with the pod's ServiceAccount token and
//	                    returns the API error text, if any
//
// Every request is logged to stdout, for `kubectl logs`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

func main() {
	port := flag.Int("port", 8443, "HTTPS port")
	certDir := flag.String("cert-dir", "/etc/gauntlet/tls", "directory with tls.crt and tls.key")
	flag.Parse()
	log.SetOutput(os.Stdout)
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	//nolint:gosec // G706: the pod's own identity, in a line the conformance test looks for verbatim
	log.Printf("gauntlet-testserver starting pod=%s namespace=%s pid=%d port=%d", os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE"), os.Getpid(), *port)

	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") } // the status already says it
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/readyz", ok)
	mux.HandleFunc("/validate", validate)
	mux.HandleFunc("/whoami", whoami)
	mux.HandleFunc("/snapshot", snapshot)
	mux.HandleFunc("/api", apiCall)
	srv := &http.Server{Addr: ":" + strconv.Itoa(*port), Handler: logged(mux), ReadHeaderTimeout: 10 * time.Second}
	err := srv.ListenAndServeTLS(filepath.Join(*certDir, "tls.crt"), filepath.Join(*certDir, "tls.key"))
	log.Fatalf("serving: %v", err)
}

func logged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
			//nolint:gosec // G706: a test server's request log, matched verbatim by the conformance test
			log.Printf("request %s %s from %s", r.Method, r.URL.RequestURI(), r.RemoteAddr)
		}
		h.ServeHTTP(w, r)
	})
}

func serverName(r *http.Request) string {
	if r.TLS == nil {
		return ""
	}
	return r.TLS.ServerName
}

func validate(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "expected an AdmissionReview", http.StatusBadRequest)
		return
	}
	var obj metav1.PartialObjectMetadata
	_ = json.Unmarshal(review.Request.Object.Raw, &obj)
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if _, deny := obj.Labels["gauntlet.dev/deny"]; deny {
		resp.Allowed = false
		resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: fmt.Sprintf(
			"denied by pod %s (tls server name %s)", os.Getenv("POD_NAME"), serverName(r))}
	}
	review.Response, review.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

func whoami(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{
		"pod": os.Getenv("POD_NAME"), "namespace": os.Getenv("POD_NAMESPACE"),
		"pid": os.Getpid(), "serverName": serverName(r),
	})
}

// snapshot reads every key of a kubelet-style volume through one resolution of its ..data
// link, the way an atomic consumer does, so a mixed old/new view means the update was not atomic.
func snapshot(w http.ResponseWriter, r *http.Request) {
	dir := r.URL.Query().Get("dir")
	target, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	data := filepath.Join(dir, target)
	entries, err := os.ReadDir(data)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	files, links := map[string]string{}, map[string]string{}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(data, e.Name())) //nolint:gosec // G304: reading the volume the test asks about is this handler's job
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		files[e.Name()] = string(raw)
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			links[e.Name()] = l
		}
	}
	writeJSON(w, map[string]any{"data": target, "files": files, "links": links})
}

func apiCall(w http.ResponseWriter, r *http.Request) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		writeJSON(w, map[string]any{"error": "in-cluster config: " + err.Error()})
		return
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		writeJSON(w, map[string]any{"error": err.Error()})
		return
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: r.URL.Query().Get("resource")}
	list, err := client.Resource(gvr).Namespace(os.Getenv("POD_NAMESPACE")).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		writeJSON(w, map[string]any{"error": err.Error()})
		return
	}
	writeJSON(w, map[string]any{"items": len(list.Items)})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
