{{/* The chart's name: the value of app.kubernetes.io/name, which the
DaemonSet selects its pods by and Prometheus takes the job name from. */}}
{{- define "nodecache.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object names: the release's name when it holds the chart's name
(`helm install nodecache` gives "nodecache", as deploy/base names them). */}}
{{- define "nodecache.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "nodecache.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "nodecache.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodecache.name" . }}
{{- end }}

{{/* Every object's labels: deploy/base's two and Helm's own. */}}
{{- define "nodecache.labels" -}}
{{ include "nodecache.selectorLabels" . }}
app.kubernetes.io/part-of: nodecache
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "nodecache.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* host:port with brackets around an IPv6 host. */}}
{{- define "nodecache.hostPort" -}}
{{- if contains ":" (index . 0) }}[{{ index . 0 }}]:{{ index . 1 }}{{ else }}{{ index . 0 }}:{{ index . 1 }}{{ end }}
{{- end }}

{{/* The kube-dns ClusterIP to intercept: the value, or the Service's. */}}
{{- define "nodecache.kubeDNSIP" -}}
{{- if .Values.interceptKubeDNS.clusterIP }}
{{- .Values.interceptKubeDNS.clusterIP }}
{{- else }}
{{- $svc := lookup "v1" "Service" "kube-system" "kube-dns" }}
{{- if not $svc }}
{{- fail "interceptKubeDNS.enabled: kube-system/kube-dns cannot be read (helm template and --dry-run have no cluster): set interceptKubeDNS.clusterIP to the kube-dns ClusterIP" }}
{{- end }}
{{- $svc.spec.clusterIP }}
{{- end }}
{{- end }}
