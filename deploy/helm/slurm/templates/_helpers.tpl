{{/* Names, labels and the pieces every resource of this chart shares. Object names are those
     of Slinky's slurm chart, so a release moved from it finds its Secrets and ConfigMaps. */}}

{{- define "slurm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Controller's name and every object's prefix: the release name alone when it already
     holds the chart's name. */}}
{{- define "slurm.fullname" -}}
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

{{- define "slurm.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "slurm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: slurm
{{- end -}}

{{/* metadata of an object: (dict "root" $ "name" <name> "component" <component>). */}}
{{- define "slurm.metadata" -}}
name: {{ .name }}
namespace: {{ include "slurm.namespace" .root }}
labels:
  {{- include "slurm.labels" .root | nindent 2 }}
  app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Secret names: a secretRef of the values wins; then a Secret of an earlier install under
     the name it had then (Slinky v1.0's <fullname>-auth-jwths256, Tightrope's
     <fullname>-slurm-key and -jwt-key), so an upgrade keeps the cluster's key; then Slinky's
     <fullname>-auth-slurm and -auth-jwt. (dict "root" $ "kind" "slurm"|"jwt") */}}
{{- define "slurm.keyRef" -}}
{{- $v := .root.Values -}}
{{- $fullname := include "slurm.fullname" .root -}}
{{- $ns := include "slurm.namespace" .root -}}
{{- $ref := dict -}}
{{- $legacy := list -}}
{{- if eq .kind "slurm" -}}
{{- $ref = ($v.slurmKey | default dict).secretRef | default dict -}}
{{- if not $ref.name -}}
{{- $ref = $v.slurmKeyRef | default dict -}}
{{- end -}}
{{- $legacy = list (list (printf "%s-slurm-key" $fullname) "slurm.key") -}}
{{- else -}}
{{- $ref = ($v.jwtKey | default dict).secretRef | default dict -}}
{{- if not $ref.name -}}
{{- $ref = $v.jwtHs256KeyRef | default dict -}}
{{- end -}}
{{- if not $ref.name -}}
{{- $ref = $v.jwtKeyRef | default dict -}}
{{- end -}}
{{- $legacy = list (list (printf "%s-auth-jwths256" $fullname) "jwt_hs256.key") (list (printf "%s-jwt-key" $fullname) "jwt_hs256.key") -}}
{{- end -}}
{{- $out := dict "name" (printf "%s-auth-%s" $fullname .kind) "key" (eq .kind "slurm" | ternary "slurm.key" "jwt.key") "user" false -}}
{{- if $ref.name -}}
{{- $_ := set $out "name" $ref.name -}}
{{- $_ := set $out "key" ($ref.key | default (get $out "key")) -}}
{{- $_ := set $out "user" true -}}
{{- else if not (lookup "v1" "Secret" $ns (get $out "name")) -}}
{{- range $legacy -}}
{{- if and (not (get $out "legacy")) (lookup "v1" "Secret" $ns (index . 0)) -}}
{{- $_ := set $out "name" (index . 0) -}}
{{- $_ := set $out "key" (index . 1) -}}
{{- $_ := set $out "legacy" true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The key references every Slurm daemon's resource carries. */}}
{{- define "slurm.keyRefs" -}}
{{- $slurm := include "slurm.keyRef" (dict "root" . "kind" "slurm") | fromJson -}}
{{- $jwt := include "slurm.keyRef" (dict "root" . "kind" "jwt") | fromJson -}}
slurmKeyRef:
  name: {{ $slurm.name }}
  key: {{ $slurm.key }}
jwtKeyRef:
  name: {{ $jwt.name }}
  key: {{ $jwt.key }}
{{- if .Values.jwksKeys.enabled }}
{{- $ref := .Values.jwksKeys.configMapRef | default dict }}
jwksKeyRef:
  name: {{ $ref.name | default (printf "%s-auth-jwks" (include "slurm.fullname" .)) }}
  key: {{ $ref.key | default "jwks.json" }}
{{- end -}}
{{- end -}}

{{- define "slurm.sssdConfRef" -}}
{{- $ref := .Values.sssd.secretRef | default dict -}}
name: {{ $ref.name | default (printf "%s-sssd-conf" (include "slurm.fullname" .)) }}
key: {{ $ref.key | default "sssd.conf" }}
{{- end -}}

{{/* An image reference from a string or {repository, tag, digest}, a digest winning over a tag.
     A helper's image (logfile, reconfigure, initconf) left empty is its component's main image;
     any other image must name a repository and a tag or digest, as Slinky's chart requires: an
     empty one would reach the pod as no image, one without a tag as :latest.
     (dict "image" <image> "path" <its values path> "main" (dict "image" <image> "path" <path>),
     main for a helper only) */}}
{{- define "slurm.image" -}}
{{- $image := .image -}}
{{- $path := .path -}}
{{- $unset := or (kindIs "invalid" $image) (and (kindIs "string" $image) (not $image)) (and (kindIs "map" $image) (not $image.repository)) -}}
{{- if and $unset .main -}}
{{- $image = .main.image -}}
{{- $path = .main.path -}}
{{- end -}}
{{- if or (kindIs "invalid" $image) (and (kindIs "string" $image) (not $image)) -}}
{{- fail (printf "%s: an image is required (\"repository:tag\", or repository and tag)" $path) -}}
{{- else if kindIs "string" $image -}}
{{- $image -}}
{{- else if not $image.repository -}}
{{- fail (printf "%s.repository: an image repository is required" $path) -}}
{{- else if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else if and (not (kindIs "invalid" $image.tag)) (ne (toString $image.tag) "") -}}
{{- printf "%s:%s" $image.repository (toString $image.tag) -}}
{{- else -}}
{{- fail (printf "%s.tag: an image tag (or a digest) is required; without one the image would be pulled as :latest" $path) -}}
{{- end -}}
{{- end -}}

{{/* A container for a CR field: the values' container with its image made a string, a pull
     policy (its own, else the chart's), and empty lists and maps left out.
     (dict "container" <values> "path" <its values path> "main" <see slurm.image> "root" $) */}}
{{- define "slurm.container" -}}
{{- $in := .container | default dict -}}
{{- $c := omit $in "image" -}}
{{- $_ := set $c "image" (include "slurm.image" (dict "image" $in.image "path" (printf "%s.image" .path) "main" .main)) -}}
{{- $_ := set $c "imagePullPolicy" ($in.imagePullPolicy | default .root.Values.imagePullPolicy) -}}
{{- range $k, $v := $c -}}
{{- if or (kindIs "invalid" $v) (and (or (kindIs "slice" $v) (kindIs "map" $v)) (empty $v)) -}}
{{- $_ := unset $c $k -}}
{{- end -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{/* A CR's pod template from a component's metadata and podSpec; (dict "c" <values> "root" $
     "extra" <spec fields the chart sets>). The chart's own labels stay off the pods: a chart
     upgrade alone rolls no pod. Empty renders nothing. */}}
{{- define "slurm.template" -}}
{{- $root := .root -}}
{{- $spec := merge (deepCopy (.c.podSpec | default dict)) (.extra | default dict) -}}
{{- $secrets := concat ($spec.imagePullSecrets | default list) ($root.Values.imagePullSecrets | default list) -}}
{{- if $secrets -}}
{{- $_ := set $spec "imagePullSecrets" $secrets -}}
{{- end -}}
{{- if and $root.Values.priorityClass.enabled (not $spec.priorityClassName) -}}
{{- $_ := set $spec "priorityClassName" $root.Values.priorityClass.name -}}
{{- end -}}
{{- range $k, $v := $spec -}}
{{- if or (kindIs "invalid" $v) (and (or (kindIs "slice" $v) (kindIs "map" $v) (kindIs "string" $v)) (empty $v)) -}}
{{- $_ := unset $spec $k -}}
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

{{/* Key=value words from a map: a list value is written v1,v2; empty values are left out;
     keys sorted. (dict "map" <map> "sep" <separator>) */}}
{{- define "slurm.confWords" -}}
{{- $words := list -}}
{{- range $k, $v := .map -}}
{{- if kindIs "slice" $v -}}
{{- if $v -}}
{{- $words = append $words (printf "%s=%s" $k (join "," $v)) -}}
{{- end -}}
{{- else if not (or (kindIs "invalid" $v) (and (kindIs "string" $v) (empty $v))) -}}
{{- $words = append $words (printf "%s=%v" $k $v) -}}
{{- end -}}
{{- end -}}
{{- join .sep $words -}}
{{- end -}}

{{/* extraConf, else extraConfMap as Key=value; (dict "c" <values> "sep" <separator>). */}}
{{- define "slurm.extraConf" -}}
{{- if kindIs "map" .c.extraConf -}}
{{- include "slurm.confWords" (dict "map" .c.extraConf "sep" .sep) -}}
{{- else if .c.extraConf -}}
{{- .c.extraConf | trimSuffix "\n" -}}
{{- else if .c.extraConfMap -}}
{{- include "slurm.confWords" (dict "map" .c.extraConfMap "sep" .sep) -}}
{{- end -}}
{{- end -}}

{{/* The rest of a partition's line from config (a string, or a map) or configMap. */}}
{{- define "slurm.partitionConfig" -}}
{{- if kindIs "map" .config -}}
{{- include "slurm.confWords" (dict "map" .config "sep" " ") -}}
{{- else if .config -}}
{{- .config -}}
{{- else if .configMap -}}
{{- include "slurm.confWords" (dict "map" .configMap "sep" " ") -}}
{{- end -}}
{{- end -}}

{{/* Whether a worker asks for NVIDIA GPUs (in slurmd's or the pod's resources). */}}
{{- define "slurm.wantsGpus" -}}
{{- $found := false -}}
{{- range $r := list (dig "slurmd" "resources" dict .) (dig "podSpec" "resources" dict .) -}}
{{- range $kind := list "limits" "requests" -}}
{{- if hasKey (get $r $kind | default dict) "nvidia.com/gpu" -}}
{{- $found = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $found }}true{{ end -}}
{{- end -}}

{{/* The values of every entry of nodesets (or loginsets) merged over nodesetDefaults (or
     loginsetDefaults), the vendor additions applied, as JSON {name: values}. Disabled entries
     are left out. (dict "root" $ "kind" "nodeset"|"loginset") */}}
{{- define "slurm.entries" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $entries := eq .kind "nodeset" | ternary $v.nodesets $v.loginsets | default dict -}}
{{- $defaults := eq .kind "nodeset" | ternary $v.nodesetDefaults $v.loginsetDefaults | default dict -}}
{{- $out := dict -}}
{{- range $name, $entry := $entries -}}
{{- $e := mergeOverwrite (deepCopy $defaults) (deepCopy ($entry | default dict)) -}}
{{- /* A key the entry sets to null drops the default, as null does in helm's own values:
     Slinky's `partition: null` is a NodeSet without spec.partition. */ -}}
{{- range $k, $v := ($entry | default dict) -}}
{{- if kindIs "invalid" $v -}}
{{- $_ := unset $e $k -}}
{{- end -}}
{{- end -}}
{{- if not (hasKey ($entry | default dict) "enabled") -}}
{{- $_ := set $e "enabled" (dig "enabled" true $defaults) -}}
{{- end -}}
{{- if $e.enabled -}}
{{- if and (eq $.kind "nodeset") (dig "nvidia" "dcgm" "enabled" false ($v.vendor | default dict)) (include "slurm.wantsGpus" $e) -}}
{{- $dir := dig "nvidia" "dcgm" "jobMappingDir" "/var/lib/dcgm-exporter/job-mapping" $v.vendor -}}
{{- $slurmd := $e.slurmd | default dict -}}
{{- $_ := set $slurmd "volumeMounts" (append ($slurmd.volumeMounts | default list) (dict "name" "dcgm-job-mapping" "mountPath" $dir)) -}}
{{- $_ := set $e "slurmd" $slurmd -}}
{{- $pod := $e.podSpec | default dict -}}
{{- $_ := set $pod "volumes" (append ($pod.volumes | default list) (dict "name" "dcgm-job-mapping" "hostPath" (dict "path" $dir "type" "DirectoryOrCreate"))) -}}
{{- $_ := set $e "podSpec" $pod -}}
{{- end -}}
{{- $_ := set $out $name $e -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}
