{{/* Names and labels. */}}
{{- define "kerneld.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kerneld.fullname" -}}
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

{{- define "kerneld.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kerneld.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kerneld.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kerneld.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kerneld.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kerneld.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Loopback plaintext listener the TLS mode probes (kubelet's gRPC probe has no TLS). */}}
{{- define "kerneld.probePort" -}}
{{- add .Values.grpcPort 1 }}
{{- end }}

{{/* A probe: gRPC on the gRPC port, or `kernelctl health` on loopback with TLS on. */}}
{{- define "kerneld.probe" -}}
{{- if .root.Values.tls.enabled }}
exec:
  command: ["kernelctl", "--target", "127.0.0.1:{{ include "kerneld.probePort" .root }}", "health"]
{{- else }}
grpc:
  port: {{ .root.Values.grpcPort }}
{{- end }}
{{- with .probe }}
periodSeconds: {{ .periodSeconds }}
{{- if .timeoutSeconds }}
timeoutSeconds: {{ .timeoutSeconds }}
{{- end }}
failureThreshold: {{ .failureThreshold }}
{{- end }}
{{- end }}
