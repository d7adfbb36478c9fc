{{/*
Names, labels and the pieces both roles share. A "role context" is a dict with the root
context as "root", the role's name ("control" or "broker") as "role" and its values as "v".
*/}}

{{- define "converge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "converge.fullname" -}}
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

{{/* The name of a role's objects: <full name> for control (the API is "the" Service), <full name>-broker. */}}
{{- define "converge.roleName" -}}
{{- $full := include "converge.fullname" .root }}
{{- if eq .role "control" }}{{ $full }}{{ else }}{{ printf "%s-%s" ($full | trunc 56 | trimSuffix "-") .role }}{{ end }}
{{- end }}

{{- define "converge.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "converge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "converge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "converge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of a role's objects (role context). */}}
{{- define "converge.roleLabels" -}}
{{ include "converge.labels" .root }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{/* Selector of a role's pods (role context). */}}
{{- define "converge.roleSelectorLabels" -}}
{{ include "converge.selectorLabels" .root }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{- define "converge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "converge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "converge.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The Secret holding DATABASE_URL: the one named, else the chart's (created when database.url is set). */}}
{{- define "converge.databaseSecret" -}}
{{- .Values.database.existingSecret | default (printf "%s-database" (include "converge.fullname" .)) }}
{{- end }}

{{- define "converge.authSecret" -}}
{{- .Values.auth.existingSecret | default (printf "%s-auth" (include "converge.fullname" .)) }}
{{- end }}

{{- define "converge.tlsSecret" -}}
{{- .Values.tls.existingSecret | default (printf "%s-tls" (include "converge.fullname" .)) }}
{{- end }}

{{/* The Secret holding the secrets key: the one named, else the chart's (created when secretsKey.key is set). Empty: no key. */}}
{{- define "converge.secretsKeySecret" -}}
{{- if .Values.secretsKey.existingSecret }}
{{- .Values.secretsKey.existingSecret }}
{{- else if .Values.secretsKey.key }}
{{- printf "%s-secrets-key" (include "converge.fullname" .) }}
{{- end }}
{{- end }}

{{/* The Secret holding the client CA: the one named, the chart's own when a PEM is given, else the TLS Secret. */}}
{{- define "converge.clientCASecret" -}}
{{- if .Values.tls.clientCA.existingSecret }}
{{- .Values.tls.clientCA.existingSecret }}
{{- else if .Values.tls.clientCA.pem }}
{{- printf "%s-client-ca" (include "converge.fullname" .) }}
{{- else }}
{{- include "converge.tlsSecret" . }}
{{- end }}
{{- end }}

{{/* http or https: what the probes and the scrape speak. */}}
{{- define "converge.scheme" -}}
{{- if .Values.tls.enabled }}HTTPS{{ else }}HTTP{{ end }}
{{- end }}

{{/*
A role's terminationGracePeriodSeconds (role context): the preStop sleep, then for a broker
SHUTDOWN_DRAIN, then the slack to close. It is always above SHUTDOWN_DRAIN, so the kubelet
never kills a broker that is still waiting for its workers' results.
*/}}
{{- define "converge.terminationGrace" -}}
{{- $drain := 0 }}
{{- if eq .role "broker" }}{{ $drain = int .v.shutdownDrainSeconds }}{{ end }}
{{- add (int .v.preStopSleepSeconds) $drain (int .v.shutdownGraceSeconds) }}
{{- end }}

{{/* The port a role's probes and /metrics answer on (role context). */}}
{{- define "converge.probePort" -}}
{{- if eq .role "control" }}http{{ else }}health{{ end }}
{{- end }}

{{/* Container env of a role (role context): the chart's variables, then env and <role>.env merged (the role's win), then extraEnv. */}}
{{- define "converge.env" -}}
{{- $root := .root }}
{{- $values := $root.Values -}}
- name: ROLE
  value: {{ .role | quote }}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "converge.databaseSecret" $root }}
      key: {{ $values.database.existingSecretKey }}
- name: DB_MAX_CONNECTIONS
  value: {{ $values.database.maxConnections | quote }}
{{- if and (eq .role "control") $values.database.readReplica.existingSecret }}
- name: DATABASE_READ_URL
  valueFrom:
    secretKeyRef:
      name: {{ $values.database.readReplica.existingSecret }}
      key: {{ $values.database.readReplica.existingSecretKey }}
- name: READ_MAX_LAG
  value: {{ $values.database.readReplica.maxLag | quote }}
{{- end }}
{{- if eq .role "control" }}
- name: LISTEN_ADDR
  value: {{ printf ":%d" (int $values.ports.http) | quote }}
{{- else }}
- name: BROKER_LISTEN_ADDR
  value: {{ printf ":%d" (int $values.ports.grpc) | quote }}
- name: HEALTH_ADDR
  value: {{ printf ":%d" (int $values.ports.health) | quote }}
- name: SHUTDOWN_DRAIN
  value: {{ printf "%ds" (int .v.shutdownDrainSeconds) | quote }}
{{- end }}
{{- if $values.auth.none }}
- name: AUTH
  value: none
{{- else }}
- name: AUTH_FILE
  value: /etc/converge/auth/auth.yaml
{{- end }}
{{- if and (eq .role "control") $values.auth.oidc.issuer }}
- name: OIDC_ISSUER
  value: {{ $values.auth.oidc.issuer | quote }}
{{- range $name, $key := dict "OIDC_AUDIENCE" "audience" "OIDC_CLIENT_ID" "clientId" "OIDC_ROLES_CLAIM" "rolesClaim" "OIDC_ROLE_MAP" "roleMap" "OIDC_SCOPES" "scopes" }}
{{- with index $values.auth.oidc $key }}
- name: {{ $name }}
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- if $values.tls.enabled }}
- name: TLS_CERT_FILE
  value: /etc/converge/tls/tls.crt
- name: TLS_KEY_FILE
  value: /etc/converge/tls/tls.key
{{- if $values.tls.clientCA.enabled }}
- name: TLS_CLIENT_CA_FILE
  value: /etc/converge/tls/client-ca.crt
{{- end }}
{{- end }}
{{- if include "converge.secretsKeySecret" $root }}
- name: SECRETS_KEY_FILE
  value: {{ printf "/etc/converge/secrets-key/%s" $values.secretsKey.existingSecretKey | quote }}
{{- with $values.secretsKey.oldKeys }}
- name: SECRETS_OLD_KEY_FILES
  value: {{ $files := list }}{{ range . }}{{ $files = append $files (printf "/etc/converge/secrets-key/%s" .) }}{{ end }}{{ join "," $files | quote }}
{{- end }}
{{- end }}
- name: LOG_LEVEL
  value: {{ $values.log.level | quote }}
- name: LOG_FORMAT
  value: {{ $values.log.format | quote }}
{{- $env := merge (deepCopy (.v.env | default dict)) ($values.env | default dict) }}
{{- range $name := keys $env | sortAlpha }}
- name: {{ $name }}
  value: {{ get $env $name | toString | quote }}
{{- end }}
{{- with $values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
