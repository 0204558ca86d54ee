{{/* Names and labels every template of this chart reads. */}}

{{- define "slurm-bridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "slurm-bridge.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "slurm-bridge.admissionName" -}}
{{- printf "%s-admission" (include "slurm-bridge.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "slurm-bridge.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "slurm-bridge.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: slinky
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "slurm-bridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-bridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "slurm-bridge.admissionSelectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-bridge.name" . }}-admission
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "slurm-bridge.image" -}}
{{- printf "%s:%s" .repository (.tag | default "dev") -}}
{{- end -}}

{{/* Neither binary needs root, a writable root or a capability. */}}
{{- define "slurm-bridge.securityContexts" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "slurm-bridge.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end -}}

{{/* A PodDisruptionBudget, only over more than one replica (over one it blocks every drain). */}}
{{- define "slurm-bridge.pdb" -}}
{{- if and .pdb.enabled (gt (int .replicas) 1) }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
spec:
  {{- if .pdb.maxUnavailable }}
  maxUnavailable: {{ .pdb.maxUnavailable }}
  {{- else }}
  minAvailable: {{ .pdb.minAvailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- .selector | nindent 6 }}
{{- end }}
{{- end -}}
