{{/* Chart name, truncated to a DNS label. */}}
{{- define "specserve.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart unless the release name already contains the chart name. */}}
{{- define "specserve.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "specserve.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "specserve.selectorLabels" -}}
app.kubernetes.io/name: {{ include "specserve.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "specserve.labels" -}}
helm.sh/chart: {{ include "specserve.chart" . }}
{{ include "specserve.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: specserve
{{- end }}

{{- define "specserve.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "specserve.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "specserve.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Watched namespaces in list mode, de-duplicated; fails early on an empty list. */}}
{{- define "specserve.watchNamespaces" -}}
{{- if and (not .Values.watch.allNamespaces) (empty .Values.watch.namespaces) }}
{{- fail "watch.allNamespaces is false: list the namespaces to watch in watch.namespaces" }}
{{- end }}
{{- .Values.watch.namespaces | uniq | toJson }}
{{- end }}

{{/*
RBAC rules, mirroring specserve.kube.rbac.REQUIRED_RULES (tests/chart checks both ways).
"namespaced": what the operator does to SpecServes and their children inside a watched namespace.
"cluster": cluster-scoped discovery reads (kopf's CRD and namespace scanning).
*/}}
{{- define "specserve.rules.namespaced" -}}
- apiGroups: ["specserve.io"]
  resources: ["specserves"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["specserve.io"]
  resources: ["specserves/status"]
  verbs: ["get", "patch"]
# blockOwnerDeletion on the children's ownerReferences needs this under OwnerReferencesPermissionEnforcement.
- apiGroups: ["specserve.io"]
  resources: ["specserves/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["services", "configmaps"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["httproutes"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: ["monitoring.coreos.com"]
  resources: ["podmonitors"]
  verbs: ["get", "list", "create", "patch", "delete"]
# Read by the Direct metrics source (it scrapes the pods' /metrics), and by the reconcile while a pool is not
# complete (the pods' reasons say why a roll is stuck); nothing watches pods.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list"]
# Listed only when another manager wrote the replicas of a pool the operator owns (names the autoscaler).
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{- define "specserve.rules.cluster" -}}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
{{- end }}
