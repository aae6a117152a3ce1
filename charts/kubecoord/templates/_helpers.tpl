{{/*
Helpers shared by every template. Object names are truncated to 63 characters because
Kubernetes names that end up in labels (and Service names, which are DNS-1123 labels) may
not be longer; the trailing "-" a cut can leave is trimmed, since names must end with an
alphanumeric character.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "kubecoord.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's objects: fullnameOverride, or RELEASE-CHART (just RELEASE
when the release name already contains the chart name), cut to 63 characters (see above).
*/}}
{{- define "kubecoord.fullname" -}}
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

{{/* chart label value: NAME-VERSION ("+" is not allowed in label values). */}}
{{- define "kubecoord.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "kubecoord.labels" -}}
helm.sh/chart: {{ include "kubecoord.chart" . }}
{{ include "kubecoord.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubecoord
{{- end }}

{{/* Labels that select the operator's pods; never change them (Deployment selectors are immutable). */}}
{{- define "kubecoord.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubecoord.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount the operator runs as. */}}
{{- define "kubecoord.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubecoord.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference: repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "kubecoord.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The metrics Service; also Prometheus's job label for the operator's metrics. */}}
{{- define "kubecoord.metricsServiceName" -}}
{{- printf "%s-metrics" (include "kubecoord.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The API version of the ValidatingAdmissionPolicy: v1 from Kubernetes 1.30, v1beta1 on
1.28-1.29 when the cluster serves it (a beta API that is off unless enabled there; helm
template knows only with --api-versions), else empty: the policy is left out and
NOTES.txt says so.
*/}}
{{- define "kubecoord.admissionPolicyApiVersion" -}}
{{- if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version }}
{{- "admissionregistration.k8s.io/v1" }}
{{- else if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1beta1/ValidatingAdmissionPolicy" }}
{{- "admissionregistration.k8s.io/v1beta1" }}
{{- end }}
{{- end }}

{{/*
The admission policy that confines Group clients: one per cluster, named independently of
the release, since every release's copy would be the same (templates/admissionpolicy.yaml);
each release binds it with a binding of its own (the operator checks both exist).
*/}}
{{- define "kubecoord.admissionPolicyName" -}}
kubecoord-lease-grants
{{- end }}

{{/* This release's binding of that policy. */}}
{{- define "kubecoord.admissionBindingName" -}}
{{- printf "%s-lease-grants" (include "kubecoord.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Whether this release renders the shared policy: no such policy in the cluster, or this
release's own (Helm's ownership annotations). Another release's is left to it: Helm would
refuse to adopt it ("invalid ownership metadata"), and the two would be the same. Without
a cluster (helm template) lookup finds nothing and the policy renders.
*/}}
{{- define "kubecoord.rendersAdmissionPolicy" -}}
{{- $found := lookup (include "kubecoord.admissionPolicyApiVersion" .) "ValidatingAdmissionPolicy" "" (include "kubecoord.admissionPolicyName" .) }}
{{- $annotations := dig "metadata" "annotations" dict $found }}
{{- if or (not $found) (and (eq (get $annotations "meta.helm.sh/release-name") .Release.Name) (eq (get $annotations "meta.helm.sh/release-namespace") .Release.Namespace)) }}true{{ end }}
{{- end }}

{{/* The policy that confines the operator's own writes (templates/operatorpolicy.yaml). */}}
{{- define "kubecoord.operatorWritesPolicyName" -}}
{{- printf "%s-operator-writes" (include "kubecoord.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The operator's term policy and its binding (templates/termpolicy.yaml). */}}
{{- define "kubecoord.termPolicyName" -}}
{{- printf "%s-operator-term" (include "kubecoord.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Whether the operator's writes are fenced at the API server (the policy is rendered). */}}
{{- define "kubecoord.fenceWrites" -}}
{{- if and .Values.rbac.fenceOperatorWrites (include "kubecoord.admissionPolicyApiVersion" .) }}true{{ end }}
{{- end }}

{{/* Why the admission policy is missing (NOTES.txt, and a comment in the rendered manifest). */}}
{{- define "kubecoord.admissionPolicySkipped" -}}
WARNING: rbac.confineGroupClients is true, but this cluster (Kubernetes {{ .Capabilities.KubeVersion.Version }}) serves
no ValidatingAdmissionPolicy API: admissionregistration.k8s.io/v1 needs 1.30, and v1beta1 on
1.28-1.29 must be enabled on the API server (--runtime-config and the ValidatingAdmissionPolicy
feature gate). The policy was NOT installed:
{{- if .Values.rbac.allowUnconfinedGroupClients }} rbac.allowUnconfinedGroupClients is true, so a
Group's spec.clients may write every Lease of their namespace, as RBAC alone allows.
{{- else }} the operator grants Group clients no Lease writes (their
Groups are Ready=False, reason Unconfined). Upgrade the cluster, or set
rbac.allowUnconfinedGroupClients=true to accept that they may write every Lease of their namespace.
{{- end }}
{{- end }}

{{/* The namespaces a namespaced operator watches: operator.namespaces, or the release namespace. */}}
{{- define "kubecoord.watchedNamespaces" -}}
{{- if .Values.operator.namespaces }}
{{- join "," .Values.operator.namespaces }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/*
What the operator does with the objects it watches and creates, in every watched
namespace. charts/kubecoord/README.md explains each verb.
*/}}
{{- define "kubecoord.resourceRules" -}}
# kopf lists and watches the resources and merge-patches its finalizer and progress
# annotations onto them (kopf never PUTs: no update); get is also granted to spec.clients.
- apiGroups: [kubecoord.dev]
  resources: [leaderelections, groups, kvstores]
  verbs: [get, list, watch, patch]
- apiGroups: [kubecoord.dev]
  resources: [leaderelections/status, groups/status, kvstores/status]
  verbs: [get, patch]
# blockOwnerDeletion on the backing objects' ownerReferences (OwnerReferencesPermissionEnforcement).
- apiGroups: [kubecoord.dev]
  resources: [leaderelections/finalizers, groups/finalizers, kvstores/finalizers]
  verbs: [update]
# create apart from the other writes: RBAC cannot limit it by name (the object does not
# exist yet). The rest cannot be limited by name either: the Leases, ConfigMaps, Roles and
# RoleBindings are named after each resource (kubecoord.wire.object_names), and spec.clients
# are granted get, list, watch, update, patch on theirs by name, which the operator can grant
# only if it holds them. templates/operatorpolicy.yaml confines all of these writes to
# objects labelled app.kubernetes.io/managed-by=kubecoord.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, update, patch, delete]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [create]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, update, patch, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
# The per-resource Role and RoleBinding: created, merge-patched (never PUT: no update),
# deleted when spec.clients is emptied; listed by label to compute kubecoord-lease-grants.
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [create]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, list, watch, patch, delete]
{{- if .Values.rbac.readBackendSecrets }}
# The Secret a resource names for its backend's credentials (spec.etcd.secretName): read
# when its connection opens, and granted by name to its spec.clients (RBAC lets the
# operator grant only what it holds). get only: never list or watch.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
{{- end }}
{{- end }}

{{/* Whether this release renders the CRD named by the list's second item: crds.enabled,
and the cluster has no such CRD that another owner manages. A CRD applied with
`kubectl apply -f crds/`, or installed by another release, stays with its owner: adopting
it would fail with Helm's ownership error (or take it from the other release), so the
release leaves it out and NOTES.txt says so. Without a cluster (helm template) lookup
finds nothing and the CRD renders. */}}
{{- define "kubecoord.rendersCrd" -}}
{{- $root := index . 0 }}
{{- if $root.Values.crds.enabled }}
{{- $found := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" (index . 1) }}
{{- $annotations := dig "metadata" "annotations" dict $found }}
{{- if or (not $found) (and (eq (get $annotations "meta.helm.sh/release-name") $root.Release.Name) (eq (get $annotations "meta.helm.sh/release-namespace") $root.Release.Namespace)) }}true{{ end }}
{{- end }}
{{- end }}

{{/* Labels on the CRDs the chart renders (crds.enabled). */}}
{{- define "kubecoord.crdLabels" -}}
{{ include "kubecoord.labels" . }}
app.kubernetes.io/component: crd
{{- end }}
