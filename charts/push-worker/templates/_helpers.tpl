{{- define "push-worker.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "push-worker.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "push-worker.labels" -}}
app.kubernetes.io/name: {{ include "push-worker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "push-worker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "push-worker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- /*
What the chart refuses to render. Several replicas (replicaCount > 1, autoscaling, KEDA) need
PUSH_REDIS_URL: without it each replica keeps dedupe, idempotency and retries in its own memory.
*/ -}}
{{- define "push-worker.refusals" -}}
{{- $redis := or (.Values.config | default dict).PUSH_REDIS_URL (.Values.secretEnv | default dict).PUSH_REDIS_URL }}
{{- $several := or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled .Values.autoscaling.keda.enabled }}
{{- if and $several (not $redis) }}
{{- fail (printf "push-worker: %s without PUSH_REDIS_URL: each replica would keep dedupe, idempotency and retries in its own memory, so a job another replica takes over is sent again and retries die with their pod. Set PUSH_REDIS_URL in config or secretEnv, or run replicaCount: 1 with autoscaling off." (ternary "autoscaling" (printf "replicaCount: %d" (int .Values.replicaCount)) (or .Values.autoscaling.enabled .Values.autoscaling.keda.enabled))) }}
{{- end }}
{{- with .Values.networkPolicy }}
{{- if hasKey . "egressTo" }}
{{- fail "push-worker: networkPolicy.egressTo was split into httpsTo, kafkaTo and redisTo, one list of destinations per port group: move its entries to the groups that need them" }}
{{- end }}
{{- end }}
{{- end -}}
