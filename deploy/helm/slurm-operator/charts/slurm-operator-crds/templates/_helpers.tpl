{{/* Why this release must leave CRD .name alone, or "" when it may manage it: the CRD does not
     exist yet, or this release (name and namespace) owns it. A CRD that another release owns
     (Slinky's two-chart install: slurm-operator-crds, then slurm-operator) or that no release
     owns (kubectl apply, or the crds/ folder of this chart before it templated them) would make
     Helm refuse the whole install or upgrade; it is left as it is instead, and the notes say how
     to hand it over. lookup finds nothing under helm template and --dry-run=client.
     (dict "root" $ "name" <CRD name>) */}}
{{- define "slurm-operator-crds.heldBy" -}}
{{- $live := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" .name -}}
{{- include "slurm-operator-crds.heldByOwner" (dict "root" .root "live" $live) -}}
{{- end -}}

{{/* The decision of heldBy, on the object lookup found (empty: none). (dict "root" $ "live" <CRD>) */}}
{{- define "slurm-operator-crds.heldByOwner" -}}
{{- if .live -}}
{{- $release := dig "metadata" "annotations" "meta.helm.sh/release-name" "" .live -}}
{{- $namespace := dig "metadata" "annotations" "meta.helm.sh/release-namespace" "" .live -}}
{{- if not $release -}}
no Helm release
{{- else if not (and (eq $release .root.Release.Name) (eq $namespace .root.Release.Namespace)) -}}
release {{ $release }} in {{ $namespace }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The CRDs of files/, by name: {name: document}, as YAML. */}}
{{- define "slurm-operator-crds.all" -}}
{{- $all := dict -}}
{{- range $path, $_ := .Files.Glob "files/*.yaml" -}}
{{- $crd := $.Files.Get $path | fromYaml -}}
{{- $_ := set $all $crd.metadata.name $crd -}}
{{- end -}}
{{- toYaml $all -}}
{{- end -}}

{{/* Notes on the CRDs left alone, with the commands that hand them to this release. */}}
{{- define "slurm-operator-crds.notes" -}}
{{- $held := list -}}
{{- range $name, $_ := include "slurm-operator-crds.all" . | fromYaml -}}
{{- with include "slurm-operator-crds.heldBy" (dict "root" $ "name" $name) -}}
{{- $held = append $held (printf "%s (%s)" $name .) -}}
{{- end -}}
{{- end -}}
{{- with $held }}

WARNING: CRDs left as they are, since release {{ $.Release.Name }} does not own them:
  {{ join "\n  " . }}
To have this release upgrade them from now on (their resources stay), hand them over and upgrade:
  kubectl label crd <name> app.kubernetes.io/managed-by=Helm --overwrite
  kubectl annotate crd <name> --overwrite meta.helm.sh/release-name={{ $.Release.Name }} meta.helm.sh/release-namespace={{ $.Release.Namespace }}
{{- end }}
{{- end -}}
