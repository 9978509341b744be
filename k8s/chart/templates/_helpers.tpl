{{/* Names and labels follow Bitnami's etcd chart, so a release of either chart under the same name
has the same StatefulSet, Services, pod names, peer URLs and PVCs (README.md, "Migrating"). */}}

{{- define "etcd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "etcd.fullname" -}}
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

{{- define "etcd.headless" -}}
{{- printf "%s-headless" (include "etcd.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "etcd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "etcd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The StatefulSet's selector: immutable, and Bitnami's, so its pods can be adopted. */}}
{{- define "etcd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "etcd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: etcd
{{- end -}}

{{- define "etcd.labels" -}}
{{ include "etcd.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "etcd.selectorString" -}}
{{- $parts := list -}}
{{- range $k, $v := (include "etcd.selectorLabels" . | fromYaml) -}}
{{- $parts = append $parts (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{- define "etcd.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "etcd.peerScheme" -}}
{{- ternary "https" "http" .Values.auth.peer.secureTransport -}}
{{- end -}}

{{- define "etcd.clientScheme" -}}
{{- ternary "https" "http" .Values.auth.client.secureTransport -}}
{{- end -}}

{{/* The pod's stable DNS name under the headless Service: its peer URL survives rescheduling. */}}
{{- define "etcd.podHost" -}}
{{- printf "$(POD_NAME).%s.$(POD_NAMESPACE).svc.%s" (include "etcd.headless" .) .Values.clusterDomain -}}
{{- end -}}

{{- define "etcd.dataDir" -}}
{{- default .Values.persistence.mountPath .Values.dataDir -}}
{{- end -}}

{{- define "etcd.peerSecret" -}}
{{- if .Values.auth.certManager.enabled -}}
{{- printf "%s-peer-tls" (include "etcd.fullname" .) -}}
{{- else -}}
{{- .Values.auth.peer.existingSecret -}}
{{- end -}}
{{- end -}}

{{- define "etcd.clientSecret" -}}
{{- if .Values.auth.certManager.enabled -}}
{{- printf "%s-client-tls" (include "etcd.fullname" .) -}}
{{- else -}}
{{- .Values.auth.client.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* The downward API every container that runs quorate needs. */}}
{{- define "etcd.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end -}}

{{/* etcd's own settings, as ETCD_* variables: quorate reads them as its flags and passes the
ones it does not decide to etcd (in the init-container variant, through etcd.conf.yml). */}}
{{- define "etcd.etcdEnv" -}}
{{- $host := include "etcd.podHost" . -}}
{{- $peer := include "etcd.peerScheme" . -}}
{{- $client := include "etcd.clientScheme" . -}}
- name: ETCD_NAME
  value: $(POD_NAME)
- name: ETCD_DATA_DIR
  value: {{ include "etcd.dataDir" . | quote }}
- name: ETCD_INITIAL_CLUSTER_TOKEN
  value: {{ .Values.initialClusterToken | quote }}
- name: ETCD_INITIAL_ADVERTISE_PEER_URLS
  value: "{{ $peer }}://{{ $host }}:{{ .Values.containerPorts.peer }}"
- name: ETCD_ADVERTISE_CLIENT_URLS
  value: "{{ $client }}://{{ $host }}:{{ .Values.containerPorts.client }}"
- name: ETCD_LISTEN_PEER_URLS
  value: "{{ $peer }}://$(POD_IP):{{ .Values.containerPorts.peer }}"
- name: ETCD_LISTEN_CLIENT_URLS
  value: "{{ $client }}://$(POD_IP):{{ .Values.containerPorts.client }}"
{{- if .Values.metrics.enabled }}
# Plain HTTP, whatever the client TLS: Prometheus scrapes it without a client certificate.
- name: ETCD_LISTEN_METRICS_URLS
  value: "http://$(POD_IP):{{ .Values.containerPorts.metrics }}"
{{- end }}
{{- with .Values.autoCompactionMode }}
- name: ETCD_AUTO_COMPACTION_MODE
  value: {{ . | quote }}
{{- end }}
{{- with .Values.autoCompactionRetention }}
- name: ETCD_AUTO_COMPACTION_RETENTION
  value: {{ . | quote }}
{{- end }}
{{- with .Values.quotaBackendBytes }}
- name: ETCD_QUOTA_BACKEND_BYTES
  value: {{ . | quote }}
{{- end }}
{{- with .Values.logLevel }}
- name: ETCD_LOG_LEVEL
  value: {{ . | quote }}
{{- end }}
{{- if .Values.auth.peer.secureTransport }}
- name: ETCD_PEER_CERT_FILE
  value: /etc/etcd/tls/peer/{{ .Values.auth.peer.certFilename }}
- name: ETCD_PEER_KEY_FILE
  value: /etc/etcd/tls/peer/{{ .Values.auth.peer.certKeyFilename }}
- name: ETCD_PEER_TRUSTED_CA_FILE
  value: /etc/etcd/tls/peer/{{ .Values.auth.peer.caFilename }}
- name: ETCD_PEER_CLIENT_CERT_AUTH
  value: {{ .Values.auth.peer.enableAuthentication | quote }}
{{- end }}
{{- if .Values.auth.client.secureTransport }}
- name: ETCD_CERT_FILE
  value: /etc/etcd/tls/client/{{ .Values.auth.client.certFilename }}
- name: ETCD_KEY_FILE
  value: /etc/etcd/tls/client/{{ .Values.auth.client.certKeyFilename }}
- name: ETCD_TRUSTED_CA_FILE
  value: /etc/etcd/tls/client/{{ .Values.auth.client.caFilename }}
- name: ETCD_CLIENT_CERT_AUTH
  value: {{ .Values.auth.client.enableAuthentication | quote }}
{{- end }}
{{- end -}}

{{/* quorate's own settings, for `quorate run` and `quorate init`. */}}
{{- define "etcd.quorateEnv" -}}
# The expected members are the StatefulSet's pods; its spec.replicas is the size.
- name: QUORATE_DISCOVERY
  value: {{ printf "provider=k8s scheme=%s service=%s statefulset=%s cluster_domain=%s label_selector=\"%s\"" (include "etcd.peerScheme" .) (include "etcd.headless" .) (include "etcd.fullname" .) .Values.clusterDomain (include "etcd.selectorString" .) | quote }}
- name: QUORATE_AGENT_LISTEN
  value: "$(POD_IP):{{ .Values.containerPorts.agent }}"
- name: QUORATE_TIMEOUT
  value: {{ .Values.quorate.timeout | quote }}
- name: QUORATE_LOG_FORMAT
  value: {{ .Values.quorate.logFormat | quote }}
{{- end -}}

{{/* For `kubectl exec <pod> -- quorate member list` (and member remove, backup save). */}}
{{- define "etcd.etcdctlEnv" -}}
- name: ETCDCTL_ENDPOINTS
  value: "{{ include "etcd.clientScheme" . }}://{{ include "etcd.podHost" . }}:{{ .Values.containerPorts.client }}"
{{- if .Values.auth.client.secureTransport }}
- name: ETCDCTL_CACERT
  value: /etc/etcd/tls/client/{{ .Values.auth.client.caFilename }}
- name: ETCDCTL_CERT
  value: /etc/etcd/tls/client/{{ .Values.auth.client.certFilename }}
- name: ETCDCTL_KEY
  value: /etc/etcd/tls/client/{{ .Values.auth.client.certKeyFilename }}
{{- end }}
{{- end -}}

{{- define "etcd.backupEnv" -}}
{{- if .Values.backup.enabled }}
- name: QUORATE_BACKUP_TO
  value: {{ required "backup.storeUrl is required when backup.enabled" .Values.backup.storeUrl | quote }}
- name: QUORATE_BACKUP_SCHEDULE
  value: {{ .Values.backup.schedule | quote }}
- name: QUORATE_BACKUP_KEEP_HOURLY_DAYS
  value: {{ .Values.backup.retention.hourlyDays | quote }}
- name: QUORATE_BACKUP_KEEP_DAILY_DAYS
  value: {{ .Values.backup.retention.dailyDays | quote }}
- name: QUORATE_BACKUP_COMPRESSION
  value: {{ .Values.backup.compression | quote }}
- name: QUORATE_BACKUP_CLUSTER
  value: {{ .Values.backup.cluster | quote }}
{{- end }}
{{- if or .Values.backup.enabled .Values.restore.fromUrl }}
{{- if .Values.backup.keySecret.name }}
- name: QUORATE_BACKUP_KEY_FILE
  value: /etc/quorate/backup-key/{{ .Values.backup.keySecret.key }}
{{- end }}
{{- end }}
{{- with .Values.restore.fromUrl }}
- name: QUORATE_RESTORE_FROM
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{- define "etcd.tlsMounts" -}}
{{- if .Values.auth.peer.secureTransport }}
- name: peer-tls
  mountPath: /etc/etcd/tls/peer
  readOnly: true
{{- end }}
{{- if .Values.auth.client.secureTransport }}
- name: client-tls
  mountPath: /etc/etcd/tls/client
  readOnly: true
{{- end }}
{{- end -}}

{{- define "etcd.dataMount" -}}
- name: data
  mountPath: {{ .Values.persistence.mountPath }}
{{- end -}}
