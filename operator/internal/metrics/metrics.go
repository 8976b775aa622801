// Package metrics defines every Prometheus collector the operator exports, registered once with
// controller-runtime's registry so they are served on the manager's metrics endpoint.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Admission results, the values of the "result" label.
const (
	ResultAllowed = "allowed"
	ResultDenied  = "denied"
	ResultSkipped = "skipped"
	// ResultError is an internal failure (e.g. undecodable object), not a policy decision.
	ResultError = "error"
)

var (
	// WebhookDuration measures the time the operator spends answering one admission request,
	// by webhook (e.g. "validate-dynamographdeployment"), operation and result. The buckets
	// start at 50µs because the handlers themselves are sub-millisecond.
	WebhookDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dynamo_webhook_request_duration_seconds",
		Help:    "Time taken by the operator to answer an admission request.",
		Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	}, []string{"webhook", "operation", "result"})

	// WebhookRequests counts admission requests by webhook, operation and result
	// (allowed, denied, skipped, error).
	WebhookRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dynamo_webhook_requests_total",
		Help: "Admission requests answered, by result (allowed, denied, skipped, error).",
	}, []string{"webhook", "operation", "result"})

	// WebhookDenials counts denied admission requests by webhook and reason, one count per
	// distinct cause type in a denial: required, invalid, immutable, forbidden, duplicate,
	// too_long, not_supported (the rules' own), and not_found, too_many, too_short, too_few,
	// type_invalid, internal, other (unknown cause type), unspecified (no causes).
	WebhookDenials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dynamo_webhook_denials_total",
		Help: "Denied admission requests, by reason (required, invalid, immutable, forbidden, duplicate, too_long, not_supported, …).",
	}, []string{"webhook", "reason"})

	// CertificateNotAfter is the expiry (Unix seconds) of the certificate the webhook server
	// currently serves.
	CertificateNotAfter = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dynamo_webhook_certificate_not_after_seconds",
		Help: "Expiry time (Unix seconds) of the webhook server's serving certificate.",
	})

	// NamespaceLeaseHeld is 1 while this (namespace-restricted) operator holds its namespace's
	// lock Lease, else 0.
	NamespaceLeaseHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dynamo_namespace_lease_held",
		Help: "1 while this namespace-restricted operator holds its namespace lock Lease.",
	}, []string{"namespace"})

	// NamespaceExcluded is 1 for each namespace a cluster-wide operator currently skips because
	// a namespace-restricted operator's Lease there is active.
	NamespaceExcluded = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dynamo_namespace_excluded",
		Help: "1 for namespaces this cluster-wide operator skips because of an active namespace lock Lease.",
	}, []string{"namespace"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(WebhookDuration, WebhookRequests, WebhookDenials,
		CertificateNotAfter, NamespaceLeaseHeld, NamespaceExcluded)
}
