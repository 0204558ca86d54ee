{{/* Names, labels and the settings every template of this chart reads. */}}

{{- define "slurm-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the release name alone when it already holds the chart's name. */}}
{{- define "slurm-operator.fullname" -}}
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

{{- define "slurm-operator.webhookName" -}}
{{- printf "%s-webhook" (include "slurm-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Where the namespaced objects go: namespaceOverride (Slinky), else the release's. */}}
{{- define "slurm-operator.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "slurm-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: slinky
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "slurm-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "slurm-operator.webhookSelectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-operator.name" . }}-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The security contexts a user's podSecurityContext and securityContext are merged over:
     neither binary needs root, a writable root or a capability. */}}
{{- define "slurm-operator.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{- define "slurm-operator.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* {"v": the first value of the list that is set}, or {} when none is. null is unset; false,
     0 and "" are values (Slinky's operator.leaderElection: false must win). As JSON, since
     include returns a string. */}}
{{- define "slurm-operator.firstSet" -}}
{{- $found := dict -}}
{{- range . -}}
{{- if and (not (hasKey $found "v")) (not (kindIs "invalid" .)) -}}
{{- $_ := set $found "v" . -}}
{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end -}}

{{/* A list from a list or from Slinky's comma-separated string ("slurm, hpc"), as JSON. */}}
{{- define "slurm-operator.splitList" -}}
{{- $out := list -}}
{{- if kindIs "string" . -}}
{{- range splitList "," . -}}
{{- with trim . -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- else if . -}}
{{- $out = . -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* A level the binaries take (debug, info, warn, error) from one of Slinky's zap levels: a
     number (1..5: more and more verbose), dpanic, panic or fatal. */}}
{{- define "slurm-operator.logLevel" -}}
{{- $level := lower (toString (default "info" .)) -}}
{{- if regexMatch "^-?[0-9]+$" $level -}}
{{- if gt (atoi $level) 0 }}debug{{ else }}info{{ end -}}
{{- else if has $level (list "dpanic" "panic" "fatal") -}}
error
{{- else if eq $level "warning" -}}
warn
{{- else -}}
{{- $level -}}
{{- end -}}
{{- end -}}

{{/* Whether an image layer names one of Slinky's own images (…/slinkyproject/slurm-operator
     or -webhook, any registry): a values file copied from Slinky's chart names them. They
     cannot run here (this chart's containers call Tightrope's binaries with Tightrope's
     flags), so such a layer is passed over. */}}
{{- define "slurm-operator.isSlinkyImage" -}}
{{- $repository := "" -}}
{{- if kindIs "string" . -}}
{{- $repository = regexReplaceAll ":[^:/]*$" (regexReplaceAll "@.*$" . "") "" -}}
{{- else if kindIs "map" . -}}
{{- $repository = toString (.repository | default "") -}}
{{- end -}}
{{- if regexMatch "(^|/)slinkyproject/slurm-operator(-webhook)?$" (lower $repository) }}true{{ end -}}
{{- end -}}

{{/* An image reference from the chart-wide image and the layers over it (operator.image, then
     webhook.image for the webhook), each (list <values path> <layer>): a string layer is a
     whole reference; a map layer replaces what it sets (a new repository drops the old digest).
     A digest wins over a tag. A layer naming Slinky's own image is passed over (above). An
     empty string, or a repository set to null or "", names no image: refused, as Slinky's chart
     refuses it, rather than quietly running the chart's default. */}}
{{- define "slurm-operator.imageRef" -}}
{{- $ref := "" -}}
{{- $repository := .base.repository -}}
{{- $tag := toString .base.tag -}}
{{- $digest := .base.digest | default "" -}}
{{- range .layers -}}
{{- $path := index . 0 -}}
{{- $layer := index . 1 -}}
{{- if include "slurm-operator.isSlinkyImage" $layer -}}
{{- else if kindIs "string" $layer -}}
{{- if not $layer }}{{ fail (printf "%s: an image is required (\"repository:tag\", or {repository, tag}); leave it unset for the chart's image" $path) }}{{ end -}}
{{- $ref = $layer -}}
{{- else if kindIs "map" $layer -}}
{{- if and (hasKey $layer "repository") (not $layer.repository) -}}
{{- fail (printf "%s.repository: an image repository is required (leave %s unset for the chart's image)" $path $path) -}}
{{- end -}}
{{- with $layer.repository }}{{ $ref = "" }}{{ $repository = . }}{{ $digest = "" }}{{ end -}}
{{- if not (kindIs "invalid" $layer.tag) }}{{ with toString $layer.tag }}{{ $tag = . }}{{ end }}{{ end -}}
{{- with $layer.digest }}{{ $digest = . }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if $ref -}}
{{- $ref -}}
{{- else if $digest -}}
{{- printf "%s@%s" $repository $digest -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
What each component runs with, after Slinky's keys and this chart's are put together: the one
place that says which key wins. Templates read it as
  $s := include "slurm-operator.settings" . | fromJson
(numbers come back as floats, which print as integers).
*/}}
{{- define "slurm-operator.settings" -}}
{{- $v := .Values -}}
{{- $op := $v.operator | default dict -}}
{{- $wh := $v.webhook | default dict -}}
{{- $fullname := include "slurm-operator.fullname" . -}}
{{- $webhookName := include "slurm-operator.webhookName" . -}}
{{- $pullPolicy := (include "slurm-operator.firstSet" (list $v.imagePullPolicy $v.image.pullPolicy) | fromJson).v -}}

{{- /* The operator. */ -}}
{{- $opImage := include "slurm-operator.imageRef" (dict "base" $v.image "layers" (list (list "operator.image" $op.image))) -}}
{{- $opSA := $op.serviceAccount | default dict -}}
{{- $opSACreate := (include "slurm-operator.firstSet" (list $opSA.create $v.serviceAccount.create) | fromJson).v -}}
{{- $opSAName := coalesce $opSA.name $v.serviceAccount.name (ternary $fullname "default" $opSACreate) -}}
{{- $workers := dict -}}
{{- range $name, $count := $op.workers -}}
{{- $_ := set $workers $name $count -}}
{{- end -}}
{{- range $name := list "accounting" "controller" "loginset" "nodeset" "restapi" "token" -}}
{{- with index $op (printf "%sWorkers" $name) -}}
{{- $_ := set $workers $name . -}}
{{- end -}}
{{- end -}}
{{- $leaderElection := (include "slurm-operator.firstSet" (list $op.leaderElection $v.leaderElection) | fromJson).v -}}
{{- $operator := dict
  "enabled" (ne (toString $op.enabled) "false")
  "replicas" (include "slurm-operator.firstSet" (list $op.replicas $v.replicas (ternary 2 1 $leaderElection)) | fromJson).v
  "leaderElection" $leaderElection
  "image" $opImage
  "pullPolicy" (coalesce $op.imagePullPolicy $pullPolicy)
  "serviceAccount" (dict "create" $opSACreate "name" $opSAName)
  "namespaces" (include "slurm-operator.splitList" $op.namespaces | fromJsonArray)
  "workers" $workers
  "logLevel" (include "slurm-operator.logLevel" $op.logLevel)
  "nodeSelector" (coalesce $op.nodeSelector $v.nodeSelector)
  "tolerations" (coalesce $op.tolerations $v.tolerations)
  "affinity" (coalesce $op.affinity $v.affinity)
  "topologySpreadConstraints" $op.topologySpreadConstraints
  "podSecurityContext" (mergeOverwrite (include "slurm-operator.podSecurityContext" . | fromYaml) (deepCopy ($op.podSecurityContext | default dict)))
  "securityContext" (mergeOverwrite (include "slurm-operator.containerSecurityContext" . | fromYaml) (deepCopy ($op.securityContext | default dict)))
  "pdb" ($op.pdb | default dict)
-}}
{{- /* Two replicas on one Node die together when it goes: with no affinity given, the scheduler
     is asked (not told: a one-Node cluster must still run both) to spread them. */ -}}
{{- if and (gt (int $operator.replicas) 1) (not $operator.affinity) -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "slurm-operator.selectorLabels" . | fromYaml)) -}}
{{- $_ := set $operator "affinity" (dict "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term)))) -}}
{{- end -}}

{{- /* The webhook: the operator's image unless webhook.image says otherwise. */ -}}
{{- $whSA := $wh.serviceAccount | default dict -}}
{{- $whSACreate := ne (toString $whSA.create) "false" -}}
{{- $validating := $wh.validating | default dict -}}
{{- $selector := $validating.namespaceSelector -}}
{{- if not $selector -}}
{{- $expressions := list -}}
{{- with include "slurm-operator.splitList" $wh.namespaces | fromJsonArray -}}
{{- $expressions = append $expressions (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" .) -}}
{{- end -}}
{{- with $wh.excludeNamespaces -}}
{{- $expressions = append $expressions (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" .) -}}
{{- end -}}
{{- $selector = ternary (dict "matchExpressions" $expressions) (dict) (gt (len $expressions) 0) -}}
{{- end -}}
{{- $webhook := dict
  "enabled" (ne (toString $wh.enabled) "false")
  "replicas" $wh.replicas
  "image" (include "slurm-operator.imageRef" (dict "base" $v.image "layers" (list (list "operator.image" $op.image) (list "webhook.image" $wh.image))))
  "pullPolicy" (coalesce $wh.imagePullPolicy $pullPolicy)
  "serviceAccount" (dict "create" $whSACreate "name" (coalesce $whSA.name (ternary $webhookName "default" $whSACreate)))
  "port" (coalesce $wh.serverPort $wh.port 9443)
  "failurePolicy" (coalesce $validating.failurePolicy $wh.failurePolicy "Fail")
  "matchPolicy" (coalesce $validating.matchPolicy "Equivalent")
  "matchConditions" ($validating.matchConditions | default list)
  "namespaceSelector" $selector
  "logLevel" (include "slurm-operator.logLevel" $wh.logLevel)
  "nodeSelector" (coalesce $wh.nodeSelector $v.nodeSelector)
  "tolerations" (coalesce $wh.tolerations $v.tolerations)
  "affinity" (coalesce $wh.affinity $v.affinity)
  "topologySpreadConstraints" $wh.topologySpreadConstraints
  "podSecurityContext" (mergeOverwrite (include "slurm-operator.podSecurityContext" . | fromYaml) (deepCopy ($wh.podSecurityContext | default dict)))
  "securityContext" (mergeOverwrite (include "slurm-operator.containerSecurityContext" . | fromYaml) (deepCopy ($wh.securityContext | default dict)))
  "pdb" ($wh.pdb | default dict)
  "secretName" (coalesce ($v.certManager | default dict).secretName (printf "%s-tls" $webhookName))
-}}
{{- toJson (dict "operator" $operator "webhook" $webhook) -}}
{{- end -}}

{{/* A pod's placement and pull secrets: (dict "root" $ "c" <component settings>). */}}
{{- define "slurm-operator.scheduling" -}}
{{- $c := .c -}}
{{- with .root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A PodDisruptionBudget's budget, as Slinky words it: maxUnavailable when set, else
     minAvailable (default 1). */}}
{{- define "slurm-operator.pdbBudget" -}}
{{- if not (kindIs "invalid" .maxUnavailable) -}}
maxUnavailable: {{ .maxUnavailable }}
{{- else if not (kindIs "invalid" .minAvailable) -}}
minAvailable: {{ .minAvailable }}
{{- else -}}
minAvailable: 1
{{- end -}}
{{- end -}}

{{/* The keys of values.yaml, for the notes to name the others (templates cannot read
     values.yaml itself). helm_test.py checks this list against values.yaml. */}}
{{- define "slurm-operator.knownKeys" -}}
"": [nameOverride, fullnameOverride, namespaceOverride, image, imagePullPolicy, imagePullSecrets,
     priorityClassName, crds, replicas, leaderElection, serviceAccount, rbac, podAnnotations,
     podLabels, nodeSelector, tolerations, affinity, operator, webhook, certManager,
     monitoring, propagatedNodeConditions, extraObjects, global, slurm-operator-crds]
operator: [enabled, replicas, leaderElection, image, imagePullPolicy, serviceAccount, nodeSelector,
           affinity, tolerations, topologySpreadConstraints, podSecurityContext, securityContext,
           pdb, logLevel, logFormat, namespaces, workers, accountingWorkers, controllerWorkers,
           loginsetWorkers, nodesetWorkers, restapiWorkers, tokenWorkers, slurmclientWorkers,
           slurmCheckPeriod, slurmHintedPeriod, mirrorSlurmDrains, drainOnNodeConditions, kubeApiQps, kubeApiBurst,
           slurmrestdUrl, metricsPort, serviceMonitor, healthPort, metricsSecure, profile,
           profileAddr, extraArgs, resources]
webhook: [enabled, replicas, image, imagePullPolicy, serviceAccount, logLevel, logFormat, port,
          serverPort, failurePolicy, timeoutSeconds, excludeNamespaces, namespaces, validating,
          podsBinding, mutating, healthPort, metricsPort, metricsSecure, leaderElection,
          nodeSelector, affinity, tolerations, topologySpreadConstraints, podSecurityContext,
          securityContext, pdb, certificate, resources]
certManager: [enabled, secretName, duration, renewBefore]
monitoring: [prometheusRule, dashboards]
{{- end -}}
