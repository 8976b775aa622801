package overhead

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// startFloor serves floorAdmit over TLS as bench/cmd/gauntlet-floor-webhook does (same
// server settings, HTTP/1.1 only) until the benchmark ends, and returns its address.
func startFloor(b *testing.B, cert *tls.Certificate) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	srv := &http.Server{
		Handler:           http.HandlerFunc(floorAdmit),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20,
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	b.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			b.Errorf("floor webhook server: %v", err)
		}
	})
	return ln.Addr().String()
}

// floorAdmit is the floor webhook's handler (bench/cmd/gauntlet-floor-webhook's admit, less
// its probe warning): it decodes request.uid only and answers allowed.
func floorAdmit(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		floorRefuse(w, http.StatusMethodNotAllowed, r.Method+" is not served: admission reviews are POSTed")
		return
	}
	var review struct {
		Request *struct {
			UID  string `json:"uid"`
			Name string `json:"name"`
		} `json:"request"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 7<<20)).Decode(&review); err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			floorRefuse(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		floorRefuse(w, http.StatusBadRequest, "the request body is not a JSON AdmissionReview: "+err.Error())
		return
	}
	if review.Request == nil || review.Request.UID == "" {
		floorRefuse(w, http.StatusBadRequest, "the AdmissionReview has no request.uid")
		return
	}
	type response struct {
		UID     string `json:"uid"`
		Allowed bool   `json:"allowed"`
	}
	body, err := json.Marshal(struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Response   response `json:"response"`
	}{"admission.k8s.io/v1", "AdmissionReview", response{UID: review.Request.UID, Allowed: true}})
	if err != nil {
		floorRefuse(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func floorRefuse(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, reason+"\n") //nolint:gosec // G705: text/plain with nosniff, never rendered as HTML
}
