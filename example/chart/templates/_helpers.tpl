{{/* The name of every object of the release. */}}
{{- define "ccm.fullname" -}}
{{- .Values.fullnameOverride | default "cloud-controller-manager" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of the cloud-config Secret. */}}
{{- define "ccm.secretName" -}}
{{- .Values.cloudConfig.existingSecret | default (printf "%s-config" (include "ccm.fullname" .)) -}}
{{- end -}}

{{/* The labels of every object, and the Deployment's selector. */}}
{{- define "ccm.labels" -}}
app.kubernetes.io/name: {{ include "ccm.fullname" . }}
{{- end -}}
