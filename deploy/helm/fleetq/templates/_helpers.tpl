{{/*
Helpers. Templates use only: include, quote, toYaml, nindent, indent,
default, trunc, trimSuffix, contains, until, add1, int, join, printf and
Go's builtins (tests/deploy_manifests.rs renders the chart with exactly
these).
*/}}

{{- define "fleetq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fleetq.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fleetq.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "fleetq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetq
{{- end -}}

{{- define "fleetq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "fleetq.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "fleetq.agentServiceAccount" -}}
{{- if .Values.serviceAccount.name -}}
{{- .Values.serviceAccount.name -}}
{{- else -}}
{{- printf "%s-agent" (include "fleetq.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The Secret mounted at /etc/fleetq/tls (`--tls-dir`). */}}
{{- define "fleetq.tlsSecret" -}}
{{- default (printf "%s-tls" (include "fleetq.fullname" .)) .Values.tls.secretName -}}
{{- end -}}

{{/* The peers' headless Service. */}}
{{- define "fleetq.peersService" -}}
{{- printf "%s-peers" (include "fleetq.fullname" .) -}}
{{- end -}}

{{/* Server i's (0-based) address: its stable DNS name in the headless Service. */}}
{{- define "fleetq.serverHost" -}}
{{- printf "%s-server-" (include "fleetq.fullname" .) -}}
{{- end -}}

{{/* The initial voters for --peers: 1=<server-0>:PORT,2=<server-1>:PORT,... */}}
{{- define "fleetq.initialPeers" -}}
{{- $host := include "fleetq.serverHost" . -}}
{{- $svc := include "fleetq.peersService" . -}}
{{- range $i, $n := until (int .Values.server.replicas) -}}
{{- if $i }},{{ end -}}
{{- add1 $i }}={{ $host }}{{ $i }}.{{ $svc }}.{{ $.Release.Namespace }}.svc.{{ $.Values.clusterDomain }}:{{ $.Values.server.port }}
{{- end -}}
{{- end -}}

{{/* Every server's address, comma-separated (the agents' FLEETQ_SERVER). */}}
{{- define "fleetq.serverAddresses" -}}
{{- $host := include "fleetq.serverHost" . -}}
{{- $svc := include "fleetq.peersService" . -}}
{{- range $i, $n := until (int .Values.server.replicas) -}}
{{- if $i }},{{ end -}}
{{ $host }}{{ $i }}.{{ $svc }}.{{ $.Release.Namespace }}.svc.{{ $.Values.clusterDomain }}:{{ $.Values.server.port }}
{{- end -}}
{{- end -}}
