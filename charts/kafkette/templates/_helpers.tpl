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
# Every verb here is one the operator uses (tests/operator/test_chart_rbac.py checks it against the API server's
# audit log). kopf lists and watches our resources and patches them (finalizers, its state, status); the
# handlers read a Topic's or a KafkaUser's KafkaCluster.
- apiGroups: [kafkette.dev]
  resources: [kafkaclusters, topics, consumergroups, kafkausers]
  verbs: [list, watch, patch]
- apiGroups: [kafkette.dev]
  resources: [kafkaclusters]
  verbs: [get]
- apiGroups: [kafkette.dev]
  resources: [kafkaclusters/status, topics/status, consumergroups/status, kafkausers/status]
  verbs: [patch]
# Owner references with blockOwnerDeletion need update on the owner's finalizers subresource (where the
# OwnerReferencesPermissionEnforcement admission plugin is on): a KafkaCluster's children, a ConsumerGroup's
# Spark driver and its objects, a KafkaUser's Secret.
- apiGroups: [kafkette.dev]
  resources: [kafkaclusters/finalizers, consumergroups/finalizers, kafkausers/finalizers]
  verbs: [update]
# Children, applied server-side (a patch, which creates what is missing); the garbage collector deletes them,
# and the StatefulSet controller deletes or keeps the volume claims (spec.storage.deleteClaim). A ConsumerGroup's
# Spark application: its driver's service account, the checkpoint claim and the role binding.
- apiGroups: [""]
  resources: [configmaps, services, serviceaccounts, persistentvolumeclaims]
  verbs: [create, patch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [create, patch]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, create, patch]
# Status reads the broker pods; rolling restarts delete them one at a time; racks are annotated on them. A
# ConsumerGroup's driver pod is created, and deleted to restart it from the checkpoint.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, create, patch, delete]
# kopf's Events (core v1).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# Secrets: a KafkaUser's (its password or client certificate) and a secured KafkaCluster's (its CAs, the brokers'
# and the operator's certificates), applied server-side and read back by name, never listed; the garbage collector
# deletes them with their owner.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch]
# The driver's service account bound to the chart's driver role, which the operator may bind (and no other)
# without holding the driver's rights itself.
- apiGroups: [rbac.authorization.k8s.io]
  resources: [rolebindings]
  verbs: [create, patch]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [{{ ternary "clusterroles" "roles" .Values.watch.clusterWide }}]
  resourceNames: [{{ include "kafkette.sparkDriver" . | quote }}]
  verbs: [bind]
{{- end -}}
