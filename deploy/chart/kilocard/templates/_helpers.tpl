{{/* The image the runner's containers run (the run, game days, the reaper). */}}
{{- define "kilocard.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The node agent's own image (root, ip, tc, nft): the runner's repository with -agent. */}}
{{- define "kilocard.agentImage" -}}
{{ .Values.image.repository }}-agent:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The labels Helm's conventions give every object, beside each manifest's own. */}}
{{- define "kilocard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kilocard
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* kilocard keeps its ledger and reads the agent token in kilocard-system: nowhere else. */}}
{{- define "kilocard.namespace" -}}
{{- if ne .Release.Namespace "kilocard-system" -}}
{{- fail (printf "kilocard installs into the namespace kilocard-system (its fault ledger and agent token live there), not %s: use --namespace kilocard-system --create-namespace" .Release.Namespace) -}}
{{- end -}}
{{ .Release.Namespace }}
{{- end }}

{{/*
The objects of one of the chart's files (the same files deploy/kustomization.yaml installs: one
source), each with the chart's labels added. Called with (list $ "files/<name>").
*/}}
{{- define "kilocard.file" -}}
{{- $root := index . 0 -}}
{{- range $doc := regexSplit "(?m)^---\\s*$" ($root.Files.Get (index . 1)) -1 }}
{{- $object := fromYaml $doc }}
{{- if $object }}
{{- $_ := set $object.metadata "labels" (merge (dict) ($object.metadata.labels | default dict) (include "kilocard.labels" $root | fromYaml)) }}
---
{{ toYaml $object }}
{{- end }}
{{- end }}
{{- end }}

{{/* The --var arguments every run and game day takes from the values. */}}
{{- define "kilocard.vars" -}}
{{- $vars := list -}}
{{- with .Values.prometheus.url }}{{ $vars = append $vars (printf "kilocard_prometheus_url=%s" .) }}{{ end -}}
{{- with .Values.prometheus.podLabel }}{{ $vars = append $vars (printf "kilocard_prometheus_pod_label=%s" .) }}{{ end -}}
{{- with .Values.prometheus.namespaceLabel }}{{ $vars = append $vars (printf "kilocard_prometheus_namespace_label=%s" .) }}{{ end -}}
{{- range $vars }}
- --var
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
A runner's pod, as `kilocard gameday schedule` makes it: in-cluster as kilocard-runner, non-root on
a read-only root filesystem (everything it writes, journals, reports and its local ledger, under
/reports), its experiments mounted read-only, time for SIGTERM's revert. Called with
(list $ <the arguments after kilocard, as YAML list items> <the experiments' ConfigMap>).
*/}}
{{- define "kilocard.runnerPod" -}}
{{- $root := index . 0 -}}
serviceAccountName: kilocard-runner
restartPolicy: Never
terminationGracePeriodSeconds: 120
securityContext: {runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001, seccompProfile: {type: RuntimeDefault}}
containers:
- name: runner
  image: {{ include "kilocard.image" $root }}
  imagePullPolicy: {{ $root.Values.image.pullPolicy }}
  command:
  - kilocard
  {{- index . 1 | nindent 2 }}
  - --journal
  - /reports
  - --reports
  - /reports
  - --ledger-dir
  - /reports/ledger
  {{- with include "kilocard.vars" $root | trim }}{{ . | nindent 2 }}{{ end }}
  env:
  - {name: HOME, value: /tmp}
  securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
  resources: {{- toYaml $root.Values.resources.runner | nindent 4 }}
  volumeMounts:
  - {name: experiments, mountPath: /experiments, readOnly: true}
  - {name: reports, mountPath: /reports}
  - {name: tmp, mountPath: /tmp}
volumes:
- name: experiments
  configMap: {name: {{ index . 2 | quote }}}
- {name: reports, emptyDir: {}}
- {name: tmp, emptyDir: {}}
{{- end }}
