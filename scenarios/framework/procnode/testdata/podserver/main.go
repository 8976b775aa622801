// Command podserver is the process the procnode integration test runs as a pod. It answers
// questions about the world as the pod sees it: files at mount paths, its environment,
// its hostname, and what the apiserver says to its ServiceAccount token.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	addr := flag.String("listen", ":8080", "listen address")
	exitCode := flag.Int("exit", -1, "exit with this code after -exit-after instead of serving")
	exitAfter := flag.Duration("exit-after", 200*time.Millisecond, "delay before -exit")
	flag.Parse()
	if *exitCode >= 0 {
		fmt.Printf("podserver exiting with %d\n", *exitCode)
		time.Sleep(*exitAfter)
		os.Exit(*exitCode)
	}

	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	http.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) {
		data, err := os.ReadFile(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = w.Write(data)
	})
	http.HandleFunc("/readlink", func(w http.ResponseWriter, r *http.Request) {
		target, err := os.Readlink(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, target)
	})
	http.HandleFunc("/env", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.Join(os.Environ(), "\n"))
	})
	http.HandleFunc("/hostname", func(w http.ResponseWriter, _ *http.Request) {
		h, _ := os.Hostname()
		_, _ = io.WriteString(w, h)
	})
	// /apiserver?method=GET&path=/api/... calls the apiserver with the pod's token, the way
	// client-go's in-cluster config does, and relays status and body.
	http.HandleFunc("/apiserver", func(w http.ResponseWriter, r *http.Request) {
		status, body, err := callAPIServer(r.URL.Query().Get("method"), r.URL.Query().Get("path"), r.URL.Query().Get("body"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	})
	fmt.Printf("podserver listening on %s\n", *addr)
	if err := http.ListenAndServe(*addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func callAPIServer(method, path, body string) (int, []byte, error) {
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return 0, nil, err
	}
	caPEM, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return 0, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return 0, nil, fmt.Errorf("no certificate in %s/ca.crt", saDir)
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return 0, nil, fmt.Errorf("KUBERNETES_SERVICE_HOST/PORT not set")
	}
	url := "https://" + host + ":" + port + path
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}
