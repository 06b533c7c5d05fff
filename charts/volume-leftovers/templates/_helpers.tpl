{{/*
The chart's name (nameOverride replaces it), at most 63 characters (a label value).
*/}}
{{- define "volume-leftovers.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of every object: fullnameOverride, else the release name when it already contains the
chart's name (release "volume-leftovers" gives "volume-leftovers"), else "RELEASE-NAME". At most
63 characters (some names become label values).
*/}}
{{- define "volume-leftovers.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
"NAME-VERSION" for the helm.sh/chart label.
*/}}
{{- define "volume-leftovers.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The labels every object carries. scripts/render-deploy.sh drops helm.sh/chart and
app.kubernetes.io/managed-by from deploy/ (Helm does not manage what kubectl applies).
*/}}
{{- define "volume-leftovers.labels" -}}
helm.sh/chart: {{ include "volume-leftovers.chart" . }}
{{ include "volume-leftovers.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The labels that select the operator's pods (Deployment, Service, PodDisruptionBudget,
ServiceMonitor). Never change them: a Deployment's selector is immutable.
*/}}
{{- define "volume-leftovers.selectorLabels" -}}
app.kubernetes.io/name: {{ include "volume-leftovers.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The ServiceAccount the pods run as (and the RBAC binds): serviceAccount.name, else the fullname
when the chart creates it, else "default".
*/}}
{{- define "volume-leftovers.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "volume-leftovers.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The name of the leader-election Lease (in the release namespace): leaderElection.leaseName, else
the fullname.
*/}}
{{- define "volume-leftovers.leaseName" -}}
{{- .Values.leaderElection.leaseName | default (include "volume-leftovers.fullname" .) }}
{{- end }}

{{/*
The container image: repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "volume-leftovers.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
