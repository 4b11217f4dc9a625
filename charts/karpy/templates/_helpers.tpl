{{/* Labels on every object: the component, part-of karpy, and Helm's bookkeeping. Call with (dict "name" "karpy-x" "root" $). */}}
{{- define "karpy.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: karpy
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}

{{/* Pod template labels (stable across upgrades: no chart version). */}}
{{- define "karpy.podLabels" -}}
app.kubernetes.io/name: {{ . }}
app.kubernetes.io/part-of: karpy
{{- end }}

{{- define "karpy.clusterName" -}}
{{ required "clusterName is required: --set clusterName=<your EKS cluster name>" .Values.clusterName }}
{{- end }}

{{- define "karpy.image" -}}
image: {{ printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{/* Pod and container hardening shared by every karpy workload. */}}
{{- define "karpy.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile: {type: RuntimeDefault}
{{- end }}

{{- define "karpy.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end }}
