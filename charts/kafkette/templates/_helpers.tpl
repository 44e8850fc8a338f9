{{/* Names and labels shared by every template. */}}
{{- define "kafkette.fullname" -}}
{{- printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Cluster-scoped names carry the namespace: two releases of the same name must not share them. */}}
{{- define "kafkette.nodeReader" -}}
{{- printf "%s-%s-node-reader" .Release.Namespace (include "kafkette.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kafkette.sparkDriver" -}}
{{- printf "%s-%s-spark-driver" .Release.Namespace (include "kafkette.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kafkette.selectorLabels" -}}
app.kubernetes.io/name: kafkette-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kafkette.labels" -}}
{{ include "kafkette.selectorLabels" . }}
app.kubernetes.io/part-of: kafkette
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* What the operator may do with the resources it manages; bound by a Role or a ClusterRole. */}}
{{- define "kafkette.rules" -}}
- apiGroups: [kafkette.dev]
  resources: [kafkaclusters, topics, consumergroups, kafkausers]
  verbs: [get, list, watch, patch, update]
- apiGroups: [kafkette.dev]
  resources: [kafkaclusters/status, topics/status, consumergroups/status, kafkausers/status]
  verbs: [get, patch, update]
# Owner references with blockOwnerDeletion need update on the owner's finalizers subresource.
- apiGroups: [kafkette.dev]
  resources: [kafkaclusters/finalizers]
  verbs: [update]
# Children of a KafkaCluster, applied server-side (patch creates); the garbage collector deletes them,
# and the StatefulSet controller deletes or keeps the volume claims (spec.storage.deleteClaim).
- apiGroups: [""]
  resources: [configmaps, services]
  verbs: [get, list, watch, create, patch]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, list, watch, create, patch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch]
# Status reads the broker pods; rolling restarts delete them one at a time; racks are annotated on them.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, patch, delete]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
# A ConsumerGroup's Spark application: its driver pod (deleted to restart it from the checkpoint), the
# checkpoint claim, and the driver's service account bound to the chart's driver role, which the operator may
# bind (and no other) without holding the driver's rights itself.
- apiGroups: [kafkette.dev]
  resources: [consumergroups/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods, serviceaccounts, persistentvolumeclaims]
  verbs: [get, list, watch, create, patch, delete]
# Secrets: a KafkaUser's (its password or client certificate) and a secured KafkaCluster's (its CAs, the brokers'
# and the operator's certificates), applied server-side and read back by name, never listed; the garbage collector
# deletes them with their owner.
- apiGroups: [kafkette.dev]
  resources: [kafkausers/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [rolebindings]
  verbs: [get, create, patch]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [{{ ternary "clusterroles" "roles" .Values.watch.clusterWide }}]
  resourceNames: [{{ include "kafkette.sparkDriver" . | quote }}]
  verbs: [bind]
{{- end -}}
