{{/*
Names. Every object is prefixed with the release name, so two releases (the cluster-wide and
the namespace-restricted operator) never collide.
*/}}
{{- define "dynamo-operator.name" -}}
dynamo-operator
{{- end -}}

{{- define "dynamo-operator.chart" -}}
{{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "dynamo-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dynamo-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dynamo-operator.labels" -}}
{{ include "dynamo-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "dynamo-operator.chart" . }}
{{- end -}}

{{- define "dynamo-operator.operatorName" -}}
{{ .Release.Name }}-operator
{{- end -}}

{{/*
Cluster-scoped RBAC names. A restricted release appends its namespace (as its webhook
configurations do), so the cluster-wide and a restricted release may share a release name.
*/}}
{{- define "dynamo-operator.clusterRoleName" -}}
{{- if .Values.namespaceRestriction.enabled -}}
{{ .Release.Name }}-operator-{{ include "dynamo-operator.restrictedNamespace" . }}
{{- else -}}
{{ .Release.Name }}-operator
{{- end -}}
{{- end -}}

{{/*
The ClusterRole that lets a scraper read /metrics: bind it to Prometheus' ServiceAccount. Named
like the other cluster-scoped objects: a restricted release appends its namespace.
*/}}
{{- define "dynamo-operator.metricsReaderName" -}}
{{- if .Values.namespaceRestriction.enabled -}}
{{ .Release.Name }}-metrics-reader-{{ include "dynamo-operator.restrictedNamespace" . }}
{{- else -}}
{{ .Release.Name }}-metrics-reader
{{- end -}}
{{- end -}}

{{- define "dynamo-operator.serviceAccountName" -}}
{{ include "dynamo-operator.operatorName" . }}
{{- end -}}

{{/* The webhook Service is a DNS label: at most 63 characters. */}}
{{- define "dynamo-operator.webhookServiceName" -}}
{{- $name := printf "%s-webhook-service" .Release.Name -}}
{{- if gt (len $name) 63 -}}
{{- fail (printf "release name %q is too long: the webhook Service name %q must be at most 63 characters (use a release name of at most 47)" .Release.Name $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/* The namespace a restricted operator serves: namespaceRestriction.namespace or the release namespace. */}}
{{- define "dynamo-operator.restrictedNamespace" -}}
{{- .Values.namespaceRestriction.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* Webhook configuration names: <release>-validating (cluster-wide), <release>-validating-<ns> (restricted). */}}
{{/*
failurePolicy of every webhook: webhook.failurePolicy when set; else Ignore for a
namespace-restricted release (the cluster-wide operator takes its namespace back when it stops,
which Fail would defeat) and Fail otherwise.
*/}}
{{- define "dynamo-operator.failurePolicy" -}}
{{- .Values.webhook.failurePolicy | default (ternary "Ignore" "Fail" .Values.namespaceRestriction.enabled) -}}
{{- end -}}

{{- define "dynamo-operator.validatingName" -}}
{{- if .Values.namespaceRestriction.enabled -}}
{{ .Release.Name }}-validating-{{ include "dynamo-operator.restrictedNamespace" . }}
{{- else -}}
{{ .Release.Name }}-validating
{{- end -}}
{{- end -}}

{{- define "dynamo-operator.mutatingName" -}}
{{- if .Values.namespaceRestriction.enabled -}}
{{ .Release.Name }}-mutating-{{ include "dynamo-operator.restrictedNamespace" . }}
{{- else -}}
{{ .Release.Name }}-mutating
{{- end -}}
{{- end -}}

{{- define "dynamo-operator.dgdrCRDName" -}}
dynamographdeploymentrequests.nvidia.com
{{- end -}}

{{/*
The certificate mode: automatic | cert-manager | external. Every template that depends on the
mode includes this, so a conflicting combination fails rendering with one clear message.
*/}}
{{- define "dynamo-operator.certMode" -}}
{{- $w := .Values.webhook -}}
{{- if and $w.certManager.enabled $w.certificateSecret.external -}}
{{- fail "webhook.certManager.enabled and webhook.certificateSecret.external are mutually exclusive: choose cert-manager mode (cert-manager issues the Secret) or external mode (you provide the Secret and webhook.caBundle), not both" -}}
{{- end -}}
{{- if $w.certificateSecret.external -}}
{{- if not $w.caBundle -}}
{{- fail (printf "webhook.certificateSecret.external=true requires webhook.caBundle: set it to the base64-encoded PEM of the CA that signed the certificate in Secret %s/%s, or the API server cannot verify the webhook" .Release.Namespace $w.certificateSecret.name) -}}
{{- end -}}
{{- if not (contains "-----BEGIN CERTIFICATE-----" (b64dec $w.caBundle)) -}}
{{- fail "webhook.caBundle must be a base64-encoded PEM certificate bundle (base64 of a file starting with -----BEGIN CERTIFICATE-----)" -}}
{{- end -}}
external
{{- else -}}
{{- if $w.caBundle -}}
{{- fail (printf "webhook.caBundle is only used with webhook.certificateSecret.external=true; in %s mode the caBundle is injected for you, so leave it empty" (ternary "cert-manager" "automatic" $w.certManager.enabled)) -}}
{{- end -}}
{{- ternary "cert-manager" "automatic" $w.certManager.enabled -}}
{{- end -}}
{{- end -}}

{{/* cert-manager objects: the serving Certificate and the chart's own CA chain. */}}
{{- define "dynamo-operator.servingCertificateName" -}}
{{ .Release.Name }}-serving-cert
{{- end -}}

{{- define "dynamo-operator.injectCAFrom" -}}
{{ .Release.Namespace }}/{{ include "dynamo-operator.servingCertificateName" . }}
{{- end -}}

{{/*
Webhooks from files/webhook/manifests.yaml (generated by controller-gen from the operator's
+kubebuilder:webhook markers), as YAML: {ValidatingWebhookConfiguration: [...],
MutatingWebhookConfiguration: [...]}. The chart keeps each webhook's name, rules, sideEffects,
admissionReviewVersions, matchPolicy, ... and replaces the deployment-specific parts.
*/}}
{{- define "dynamo-operator.generatedWebhooks" -}}
{{- $path := "files/webhook/manifests.yaml" -}}
{{- $raw := .Files.Get $path -}}
{{- if not $raw -}}
{{- fail (printf "%s is missing or empty: run `make generate` to generate it from the operator's +kubebuilder:webhook markers" $path) -}}
{{- end -}}
{{- $out := dict "ValidatingWebhookConfiguration" (list) "MutatingWebhookConfiguration" (list) -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" $raw -1 -}}
{{- if trim $doc -}}
{{- $obj := fromYaml $doc -}}
{{- if hasKey $obj "Error" -}}
{{- fail (printf "parsing %s: %s" $path $obj.Error) -}}
{{- end -}}
{{- if $obj.kind -}}
{{- if not (hasKey $out $obj.kind) -}}
{{- fail (printf "%s: unexpected kind %q (expected ValidatingWebhookConfiguration or MutatingWebhookConfiguration)" $path $obj.kind) -}}
{{- end -}}
{{- $_ := set $out $obj.kind (concat (get $out $obj.kind) ($obj.webhooks | default (list))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
caBundles that are live in the cluster, as YAML {<webhook name>: <caBundle>, "": <any of them>}.
In automatic and cert-manager mode the operator or cainjector writes them after install; the
chart renders them back so `helm upgrade` does not wipe them (a three-way merge would remove a
field the previous manifest carried and the new one lacks). `lookup` is empty under
`helm template` and dry runs, which is fine: then there is nothing to preserve.
*/}}
{{- define "dynamo-operator.liveCABundles" -}}
{{- $out := dict "" "" -}}
{{- $configs := list
  (lookup "admissionregistration.k8s.io/v1" "ValidatingWebhookConfiguration" "" (include "dynamo-operator.validatingName" .))
  (lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" (include "dynamo-operator.mutatingName" .)) -}}
{{- range $live := $configs -}}
{{- range $w := (dig "webhooks" (list) $live) -}}
{{- $ca := dig "clientConfig" "caBundle" "" $w -}}
{{- if $ca -}}
{{- $_ := set $out $w.name $ca -}}
{{- if not (get $out "") }}{{ $_ := set $out "" $ca }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
RBAC rules. Written once; rendered into a ClusterRole (cluster-wide operator) or into a Role in
the restricted namespace (namespace-restricted operator).
*/}}
{{- define "dynamo-operator.rules.dynamo" -}}
- apiGroups: ["nvidia.com"]
  resources:
  - dynamocomponentdeployments
  - dynamographdeployments
  - dynamographdeploymentrequests
  - dynamomodels
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["nvidia.com"]
  resources:
  - dynamocomponentdeployments/status
  - dynamographdeployments/status
  - dynamographdeploymentrequests/status
  - dynamomodels/status
  - dynamocomponentdeployments/finalizers
  - dynamographdeployments/finalizers
  - dynamographdeploymentrequests/finalizers
  - dynamomodels/finalizers
  verbs: ["get", "update", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{/*
Namespace Leases (dynamo-operator-ns-lock): the restricted operator holds one in its namespace;
the cluster-wide operator only watches them in every namespace.
*/}}
{{- define "dynamo-operator.rules.leases" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
{{- if .Values.namespaceRestriction.enabled }}
  verbs: ["get", "create", "update", "patch", "delete"]
{{- else }}
  verbs: ["get", "list", "watch"]
{{- end }}
{{- end -}}

{{/*
The restricted operator's served probe: a dry-run create of a DynamoGraphDeployment in its
namespace, whose warnings tell it that the API server reaches its webhooks through its Service;
only then does it take the namespace's Lease. RBAC cannot limit create to dry runs; the operator
sends no other create.
*/}}
{{- define "dynamo-operator.rules.servedProbe" -}}
- apiGroups: ["nvidia.com"]
  resources: ["dynamographdeployments"]
  verbs: ["create"]
{{- end -}}

{{/*
Automatic mode: the operator stores its generated CA and serving certificate in one Secret. It
reads it by name and watches it with a metadata.name field selector (a direct client, no cache),
so every verb but create is limited to that name; create cannot be (the name is not part of a
create request's URL). No list: nothing lists Secrets.
*/}}
{{- define "dynamo-operator.rules.certSecret" -}}
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: [{{ .Values.webhook.certificateSecret.name | quote }}]
  verbs: ["get", "watch", "update", "patch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
{{- end -}}

{{/*
The leader-election Lease (<release>-operator-leader) in the release namespace: one replica leads
(reconcilers, certificate generation and injection). Not the namespace lock Lease
dynamo-operator-ns-lock of a restricted release. create cannot be limited by name.
*/}}
{{- define "dynamo-operator.leaderElectionID" -}}
{{ include "dynamo-operator.operatorName" . }}-leader
{{- end -}}

{{- define "dynamo-operator.rules.leaderElection" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: [{{ include "dynamo-operator.leaderElectionID" . | quote }}]
  verbs: ["get", "update", "patch"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{/*
Automatic mode: inject the caBundle into this release's own webhook configurations and, when
this release installs the CRDs, into the DGDR CRD's conversion webhook - nothing else.
*/}}
{{- define "dynamo-operator.rules.caInjection" -}}
- apiGroups: ["admissionregistration.k8s.io"]
  resources: ["validatingwebhookconfigurations"]
  resourceNames: [{{ include "dynamo-operator.validatingName" . | quote }}]
  verbs: ["get", "update", "patch"]
- apiGroups: ["admissionregistration.k8s.io"]
  resources: ["mutatingwebhookconfigurations"]
  resourceNames: [{{ include "dynamo-operator.mutatingName" . | quote }}]
  verbs: ["get", "update", "patch"]
{{- if .Values.crds.install }}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  resourceNames: [{{ include "dynamo-operator.dgdrCRDName" . | quote }}]
  verbs: ["get", "update", "patch"]
{{- end }}
{{- end -}}
