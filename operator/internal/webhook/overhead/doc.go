// Package overhead holds benchmarks of the admission webhook server's cost per request: the
// operator's real stack (webhook.Server, webhook.Register's decorators, controller-runtime's
// handlers, the operator's logger) against a minimal webhook equivalent to the bench's floor
// (bench/cmd/gauntlet-floor-webhook), both over a kept-alive HTTP/1.1 TLS connection as the
// API server calls them, and both handlers called in process without the transport.
//
//	go test ./internal/webhook/overhead -run '^$' -bench . -benchmem
package overhead
