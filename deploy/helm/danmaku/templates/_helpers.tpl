{{/* Name of the release's objects: <release>-danmaku, or the release alone when it names the chart. */}}
{{- define "danmaku.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "danmaku.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one role: include "danmaku.selector" (list $ "comet") */}}
{{- define "danmaku.selector" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ $.Chart.Name }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "danmaku.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "danmaku.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "danmaku.fullname" .)) -}}
{{- end -}}

{{/* A secret's variable; optional ones may be missing from an existing Secret. */}}
{{- define "danmaku.secretEnv" -}}
{{- $ := index . 0 -}}
- name: {{ index . 1 }}
  valueFrom:
    secretKeyRef:
      name: {{ include "danmaku.secretName" $ }}
      key: {{ index . 2 }}
      optional: {{ index . 3 }}
{{- end -}}

{{/* Environment of every role: the common ConfigMap, the Redis password. */}}
{{- define "danmaku.commonEnv" -}}
{{- if or .Values.redis.password .Values.secrets.existingSecret }}
{{ include "danmaku.secretEnv" (list . "DANMAKU_REDIS_PASSWORD" "redis-password" true) }}
{{- end }}
{{- if or .Values.secrets.authHMACSecret .Values.secrets.existingSecret }}
{{ include "danmaku.secretEnv" (list . "DANMAKU_AUTH_HMAC_SECRET" "auth-hmac-secret" true) }}
{{- end }}
{{- end -}}

{{/* <role>.env as environment entries. */}}
{{- define "danmaku.extraEnv" -}}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- end -}}

{{- define "danmaku.metricsAnnotations" -}}
{{- $ := index . 0 -}}
{{- if $.Values.metricsAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ index . 1 | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{/* Fails the rendering with a message naming the value when one is wrong. */}}
{{- define "danmaku.validate" -}}
{{- if not .Values.redis.addrs -}}
{{- fail "redis.addrs: set the address of your Redis (several seed nodes for Redis Cluster)" -}}
{{- end -}}
{{- if and .Values.redis.cluster (lt (len .Values.redis.addrs) 2) -}}
{{- fail "redis.addrs: Redis Cluster needs two or more seed nodes (one address means a standalone server)" -}}
{{- end -}}
{{- if and (not .Values.redis.cluster) (gt (len .Values.redis.addrs) 1) -}}
{{- fail "redis.addrs: several addresses mean Redis Cluster: set redis.cluster to true" -}}
{{- end -}}
{{- if not .Values.kafka.brokers -}}
{{- fail "kafka.brokers: set the bootstrap brokers of your Kafka (host:port)" -}}
{{- end -}}
{{- if not .Values.secrets.existingSecret -}}
{{- if lt (len .Values.secrets.pushSecret) 16 -}}
{{- fail "secrets.pushSecret: set 16 or more random bytes (openssl rand -hex 16), or secrets.existingSecret" -}}
{{- end -}}
{{- if and .Values.archive.enabled (not .Values.secrets.archiveDSN) -}}
{{- fail "secrets.archiveDSN: the archive needs its PostgreSQL, postgres://user:password@host:5432/db" -}}
{{- end -}}
{{- if and .Values.secrets.adminSecret (lt (len .Values.secrets.adminSecret) 16) -}}
{{- fail "secrets.adminSecret: 16 or more bytes, or empty (admin API off)" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.ingress.enabled (not .Values.ingress.host) -}}
{{- fail "ingress.host: the host name browsers use (the demo page is served for it)" -}}
{{- end -}}
{{- end -}}

{{/* Metadata of one role's object: include "danmaku.meta" (list $ "comet" "name") */}}
{{- define "danmaku.meta" -}}
{{- $ := index . 0 -}}
metadata:
  name: {{ index . 2 }}
  labels:
    {{- include "danmaku.labels" $ | nindent 4 }}
    app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* Pod-level settings shared by the roles: (list $ roleValues) */}}
{{- define "danmaku.podSpec" -}}
{{- $ := index . 0 -}}
{{- $v := index . 1 -}}
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $.Values.podSecurityContext | nindent 2 }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod template annotations: (list $ metricsPort). A changed ConfigMap rolls
the pods; a changed Secret does not (its hash would be readable by anyone who
may read pods): kubectl rollout restart after changing one. */}}
{{- define "danmaku.podAnnotations" -}}
{{- $ := index . 0 -}}
checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") $ | sha256sum }}
{{- if $.Values.metricsAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ index . 1 | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{/* Container settings shared by the roles: (list $ role) */}}
{{- define "danmaku.container" -}}
{{- $ := index . 0 -}}
name: {{ index . 1 }}
image: {{ include "danmaku.image" $ }}
imagePullPolicy: {{ $.Values.image.pullPolicy }}
command: ["/usr/local/bin/{{ index . 1 }}"]
securityContext:
  {{- toYaml $.Values.securityContext | nindent 2 }}
envFrom:
  - configMapRef:
      name: {{ include "danmaku.fullname" $ }}
{{- end -}}

{{/* liveness /healthz, readiness /readyz on a named port */}}
{{- define "danmaku.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: {{ . }}
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ . }}
  periodSeconds: 5
  failureThreshold: 2
{{- end -}}

{{/* HorizontalPodAutoscaler of a role's Deployment: (list $ role name autoscalingValues) */}}
{{- define "danmaku.hpa" -}}
{{- $a := index . 3 -}}
{{- if $a.enabled }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
{{ include "danmaku.meta" . }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ index . 2 }}
  minReplicas: {{ $a.minReplicas }}
  maxReplicas: {{ $a.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $a.targetCPUUtilizationPercentage }}
  {{- with $a.scaleDownStabilizationSeconds }}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: {{ . }}
      policies:
        - type: Pods
          value: 1
          periodSeconds: 120
  {{- end }}
{{- end }}
{{- end -}}

{{/* PodDisruptionBudget of a role: (list $ role name pdbValues) */}}
{{- define "danmaku.pdb" -}}
{{- $p := index . 3 -}}
{{- if $p.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
{{ include "danmaku.meta" . }}
spec:
  {{- if hasKey $p "minAvailable" }}
  minAvailable: {{ $p.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $p.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "danmaku.selector" (list (index . 0) (index . 1)) | nindent 6 }}
{{- end }}
{{- end -}}

{{/* Browser origins a role accepts: its allowedOrigins, or with the Ingress
on and none listed, the Ingress' origin (the comet refuses a page of a DNS
name it was not told, to stop DNS rebinding). (list $ roleValues) */}}
{{- define "danmaku.allowedOrigins" -}}
{{- $ := index . 0 -}}
{{- $v := index . 1 -}}
{{- if $v.allowedOrigins -}}
{{- join "," $v.allowedOrigins -}}
{{- else if $.Values.ingress.enabled -}}
{{- include "danmaku.ingressOrigin" $ -}}
{{- end -}}
{{- end -}}

{{- define "danmaku.ingressOrigin" -}}
{{- printf "%s://%s" (ternary "https" "http" (not (empty .Values.ingress.tls))) .Values.ingress.host -}}
{{- end -}}
