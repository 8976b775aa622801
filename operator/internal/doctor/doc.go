// Package doctor runs the checks of the Dynamo webhook documentation's troubleshooting section
// against a live cluster, for one Helm release of the operator (Doctor) or for any operator's
// webhooks (WebhookDoctor), and says which documented cause (CATALOG.md §T, by T-ID) is behind
// a broken admission path and what fixes it.
//
// It follows cert-manager's cmapichecker (dry-run a known-good and a known-bad object, classify
// a failed webhook call by its error text) and goes further: it inspects the operator
// Deployment, the cert-controller's RBAC (SubjectAccessReview), the serving-certificate Secret,
// the webhook configurations and their caBundles, the namespaceSelector, the webhook Service
// and its EndpointSlices, the certificate the webhook actually serves (a TLS handshake with
// ServerName <svc>.<ns>.svc) and the operator's logs.
//
// # One fault, one root cause
//
// A single fault usually breaks several checks: a deleted Service also fails the handshake and
// the dry-run. So that the report names exactly one cause per fault, every check declares two
// kinds of upstream checks:
//
//   - needs: checks that produce its input (the Service it dials, the endpoints behind it).
//     When one of them did not pass, the check does not run and is reported as StatusSkipped
//     ("–", "skipped: depends on …"). A check that finds its input missing by itself (no
//     parseable caBundle to verify against) skips itself the same way.
//   - after: checks whose failure explains a failure here. When the check fails and one of
//     them did not pass, it is reported as StatusConsequence ("✗ … (consequence of …)"): its
//     cause and fix are still shown, but it is not a root cause.
//
// A check that fails while everything upstream of it passed is StatusFail: a root cause. (Checks
// left when the run's context ends are skipped too, so a timeout never adds root causes.) Its
// Result names one cause (with the T-ID when the documentation lists it), the fix command and
// details. Checks run in a fixed order in which every upstream check comes first; Report.Roots
// returns the root causes, Report.Healthy is true only when every check passed.
//
// # Checks and the causes they name
//
//	api-server              the API server answers (everything needs it)
//	operator-deployment     Deployment <release>-operator; its arguments name the other objects
//	cert-controller-rbac    T10 (automatic mode; SubjectAccessReviews for the ServiceAccount)
//	certificate-secret      T11 missing, T4 SAN, T5 validity; keys and key pair
//	webhook-configurations  T1 (and the MutatingWebhookConfiguration)
//	ca-bundle               T3 empty, not PEM, or not trusting the Secret's certificate
//	namespace-selector      T2 for --test-namespace
//	webhook-service         T8; clientConfig.service name and port
//	service-endpoints       T6 / T7 (by failurePolicy) from EndpointSlices
//	serving-certificate     T3 / T4 / T5 / T6 / T9, from a real TLS handshake given the longest
//	                        timeoutSeconds of the webhooks, as the API server gives a call
//	operator-logs           "Registering validation webhooks", "Starting webhook server"
//	admission-dry-run       T9 and, as consequences, the failed-call texts of T1-T8
//
// # Any operator's webhooks
//
// WebhookDoctor (kubectl webhook-doctor) runs the same checks, with the same IDs and causes,
// against any operator, named by its webhook Service rather than a release: the
// configurations are every Validating- and MutatingWebhookConfiguration with a webhook whose
// clientConfig.service is that Service (none is T1), the Deployment is the one the Service's
// selector matches, the Secret the one its serving container mounts (or --secret; when it
// cannot be named the certificate-secret check has nothing to examine, which does not make the
// report unhealthy). Without --service, the Service is the one that webhook configurations and
// CRD conversion webhooks in the namespace call; several or none is the caller's error, not a
// finding. The release's extras — operator-deployment, cert-controller-rbac, operator-logs and
// the namespace Lease note — are gauntlet's operator's own and do not run (releaseExtras).
// Fixes say what must happen instead of naming gauntlet's chart, since who issues the
// operator's certificates and injects its caBundles is not known (modeUnknown).
//
// Its admission-dry-run is the one check that differs. A release's dry-run sends a known-good
// and a known-bad DynamoGraphDeployment and judges the answers; for an arbitrary operator the
// doctor knows no valid or invalid object, and pretending to would fail healthy operators or
// pass broken ones. So it asks the one question it can answer honestly, per webhook: does the
// API server reach it? It dry-run creates an object of a resource the webhook's CREATE rules
// match (a ConfigMap for a rule on every core resource, whose emptiest instance is valid, so it
// also reaches validating webhooks, which the API server calls only after schema validation)
// in the test namespace, with the objectSelector's matchLabels. The API server's "failed
// calling webhook" for one of the examined webhooks fails the check, classified by its error
// text as the release's dry-run does (T3-T9); the webhook's own denial or the object admitted
// shows the call was answered. What cannot show it — no CREATE rule, failurePolicy Ignore (a
// failed call admits too), matchConditions the doctor does not evaluate, another webhook
// denying first, an object rejected before validation — is reported in the details, and when
// no webhook could be probed the check has nothing to examine.
//
// Nothing the doctor prints contains key material: Secrets are parsed, never echoed.
package doctor
