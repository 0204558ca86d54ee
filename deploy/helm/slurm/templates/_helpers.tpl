{{/* Names, labels and the pieces every resource of this chart shares. */}}

{{- define "slurm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Controller's name and every object's prefix: the release name alone when it already
     holds the chart's name. */}}
{{- define "slurm.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "slurm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: slurm
{{- end -}}

{{- define "slurm.slurmKeySecret" -}}
{{- default (printf "%s-slurm-key" (include "slurm.fullname" .)) .Values.slurmKeyRef.name -}}
{{- end -}}

{{- define "slurm.jwtKeySecret" -}}
{{- default (printf "%s-jwt-key" (include "slurm.fullname" .)) .Values.jwtKeyRef.name -}}
{{- end -}}

{{- define "slurm.sssdSecret" -}}
{{- printf "%s-sssd-conf" (include "slurm.fullname" .) -}}
{{- end -}}

{{/* The two key references every Slurm daemon's resource carries. */}}
{{- define "slurm.keyRefs" -}}
slurmKeyRef:
  name: {{ include "slurm.slurmKeySecret" . }}
  key: {{ .Values.slurmKeyRef.key }}
jwtKeyRef:
  name: {{ include "slurm.jwtKeySecret" . }}
  key: {{ .Values.jwtKeyRef.key }}
{{- end -}}

{{/* "repository:tag" of (dict "image" <image> "default" <image>): the default stands in for
     an image whose repository is empty. */}}
{{- define "slurm.image" -}}
{{- $image := .image | default dict -}}
{{- if not $image.repository -}}
{{- $image = .default -}}
{{- end -}}
{{- if $image.tag -}}
{{- printf "%s:%s" $image.repository (toString $image.tag) -}}
{{- else -}}
{{- $image.repository -}}
{{- end -}}
{{- end -}}

{{/* A container for a CR field: the values' container with its image made a string and the
     chart's pull policy. (dict "container" <values> "default" <image> "root" $) */}}
{{- define "slurm.container" -}}
{{- $c := omit (.container | default dict) "image" -}}
{{- $_ := set $c "image" (include "slurm.image" (dict "image" (.container | default dict).image "default" .default)) -}}
{{- $_ := set $c "imagePullPolicy" .root.Values.imagePullPolicy -}}
{{- range $k, $v := $c -}}
{{- if and (kindIs "slice" $v) (empty $v) -}}
{{- $_ := unset $c $k -}}
{{- else if and (kindIs "map" $v) (empty $v) -}}
{{- $_ := unset $c $k -}}
{{- end -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{/* A CR's pod template from a component's metadata and podSpec; (dict "c" <values> "root" $
     "extra" <spec fields the chart sets>). Empty renders nothing. */}}
{{- define "slurm.template" -}}
{{- $spec := merge (deepCopy (.c.podSpec | default dict)) (.extra | default dict) -}}
{{- with .root.Values.imagePullSecrets -}}
{{- if not (hasKey $spec "imagePullSecrets") -}}
{{- $_ := set $spec "imagePullSecrets" . -}}
{{- end -}}
{{- end -}}
{{- $t := dict -}}
{{- with .c.metadata -}}
{{- $_ := set $t "metadata" . -}}
{{- end -}}
{{- if $spec -}}
{{- $_ := set $t "spec" $spec -}}
{{- end -}}
{{- if $t -}}
template:
  {{- toYaml $t | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* The rest of a partition's line from a string or a map of Slurm keys (sorted). */}}
{{- define "slurm.partitionConfig" -}}
{{- if kindIs "map" . -}}
{{- $words := list -}}
{{- range $k, $v := . -}}
{{- $words = append $words (printf "%s=%v" $k $v) -}}
{{- end -}}
{{- join " " $words -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}
