{{/* The release's resource name: "<release>-naiad", or the release name when it says naiad. */}}
{{- define "naiad.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "naiad.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "naiad.labels" -}}
{{ include "naiad.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "naiad.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "naiad.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Requests and limits, with the GPUs asked for (extended resources: limits, and requests equal). */}}
{{- define "naiad.resources" -}}
{{- $resources := deepCopy (default dict .Values.resources) -}}
{{- if gt (int .Values.gpu.count) 0 -}}
{{- $limits := default dict $resources.limits -}}
{{- $_ := set $limits "nvidia.com/gpu" (int .Values.gpu.count) -}}
{{- $_ := set $resources "limits" $limits -}}
{{- end -}}
{{- toYaml $resources -}}
{{- end -}}
