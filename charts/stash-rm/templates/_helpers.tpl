{{/* The services, their gRPC ports and who may call them (the gateway calls every one). */}}
{{- define "stash-rm.grpcServices" -}}
ingest:
  port: 50051
  peers: [gateway, labeler, trainer, scorer, gepa]
labeler:
  port: 50052
  peers: [ingest, trainer]
trainer:
  port: 50053
  peers: [scorer, gepa, worker]
scorer:
  port: 50054
  peers: [trainer, worker]
gepa:
  port: 50055
  peers: [worker]
{{- end -}}

{{/* Services that use Redis (STASH_<SVC>_REDIS_URL: wake-ups; the gateway's shared rate limits), and those that launch worker jobs. */}}
{{- define "stash-rm.redisServices" -}}
[gateway, labeler, trainer, scorer, gepa]
{{- end -}}
{{- define "stash-rm.launchers" -}}
[trainer, scorer, gepa]
{{- end -}}

{{- define "stash-rm.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The name of one component's objects: <fullname>-<component>. Call with (list $ "ingest"). */}}
{{- define "stash-rm.componentName" -}}
{{- printf "%s-%s" (include "stash-rm.fullname" (index . 0)) (index . 1) -}}
{{- end -}}

{{- define "stash-rm.labels" -}}
{{- $root := index . 0 -}}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
{{ include "stash-rm.selectorLabels" . }}
{{- end -}}

{{- define "stash-rm.selectorLabels" -}}
app.kubernetes.io/name: {{ (index . 0).Chart.Name }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* An image reference: (list $ "stash-rm-gateway"). A digest, when set, wins over the tag. */}}
{{- define "stash-rm.image" -}}
{{- $root := index . 0 -}}
{{- $image := $root.Values.image -}}
{{- $ref := printf "%s/%s" $image.registry (index . 1) -}}
{{- $digest := index $image.digests (index . 1) | default "" -}}
{{- if $digest -}}
{{- printf "%s@%s" $ref $digest -}}
{{- else -}}
{{- printf "%s:%s" $ref ($image.tag | default $root.Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{- define "stash-rm.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "stash-rm.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Fail rendering on combinations the schema cannot express; each message names the value to set. */}}
{{- define "stash-rm.validate" -}}
{{- if not .Values.database.existingSecret -}}
{{- fail "database.existingSecret is required: the cluster profile keeps every service's tables in PostgreSQL (a Secret with one URL per service)" -}}
{{- end -}}
{{- if not .Values.redis.existingSecret -}}
{{- fail "redis.existingSecret is required: the cluster profile wakes the labeler, trainer, scorer and gepa replicas through Redis" -}}
{{- end -}}
{{- if not .Values.s3.bucket -}}
{{- fail "s3.bucket is required: in the cluster profile checkpoints and skills live in object storage shared by every pod" -}}
{{- end -}}
{{- if and .Values.gateway.ingress.enabled (not .Values.gateway.ingress.host) -}}
{{- fail "gateway.ingress.host is required when gateway.ingress.enabled is true" -}}
{{- end -}}
{{- range $name := list "gateway" "ingest" -}}
{{- $scaling := (index $.Values $name).autoscaling -}}
{{- if and $scaling.enabled (gt (int $scaling.minReplicas) (int $scaling.maxReplicas)) -}}
{{- fail (printf "%s.autoscaling.minReplicas (%d) must not exceed %s.autoscaling.maxReplicas (%d)" $name (int $scaling.minReplicas) $name (int $scaling.maxReplicas)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
