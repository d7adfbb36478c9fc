#!/usr/bin/env bash
# Installs, at pinned versions and once per machine, what scripts/deploy-check.sh needs to
# check the Helm chart offline, and prints where each is as shell assignments to eval:
#
#   eval "$(scripts/deploy-tools.sh)"   # sets HELM, KUBECONFORM, DEPLOY_PYTHON, K8S_SCHEMAS,
#                                       # KUBE_VERSIONS
#
#   helm, kubeconform   Go programs, `go install`ed from the Go module proxy (CGO off)
#   DEPLOY_PYTHON       a venv's python with PyYAML (the checks in deploy/tests/ read YAML),
#                       from the lock scripts/pylock/deploy.txt (scripts/pylock.sh)
#   K8S_SCHEMAS         JSON schemas in kubeconform's layout: Kubernetes' own, from the
#                       kubernetes-validate wheel on PyPI (which ships them for every minor
#                       release; locked with its hash in scripts/pylock/kubernetes-validate.txt), and the Prometheus Operator's ServiceMonitor, generated with
#                       controller-gen from its Go API types (the way upstream makes its CRDs)
#   KUBE_VERSIONS       the Kubernetes releases the chart is validated against: the oldest it
#                       supports (Chart.yaml's kubeVersion) and the newest with schemas
#
# Everything lives under ${XDG_CACHE_HOME:-~/.cache}/converge/deploy-tools, one directory per
# pinned version, made in a temporary directory and renamed into place, so an interrupted run
# leaves nothing half-made. Any failure to install is an error (exit 1): the checks never skip.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

HELM_VERSION=v4.3.2
KUBECONFORM_VERSION=v0.8.0
CONTROLLER_GEN_VERSION=v0.23.0
PROMETHEUS_OPERATOR_API_VERSION=v0.95.2
# The version is also the lock's (scripts/pylock/kubernetes-validate.txt), which must agree.
KUBERNETES_VALIDATE_VERSION=1.37.0
KUBE_VERSIONS="1.30.0 1.37.0"

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/converge/deploy-tools"
mkdir -p "$CACHE"

die() {
    echo "deploy-tools.sh: error: $*" >&2
    exit 1
}

command -v go >/dev/null 2>&1 || die "go not found; install Go >= 1.26 (helm and kubeconform are built with go install)"
command -v python3 >/dev/null 2>&1 || die "python3 not found; install Python >= 3.11"

# go_tool NAME PACKAGE VERSION: prints the path of NAME built from PACKAGE@VERSION.
go_tool() {
    local name="$1" pkg="$2" version="$3"
    [[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "go_tool $name: '$version' is not an exact vX.Y.Z"
    local dir="$CACHE/$name-$version"
    if [[ ! -x "$dir/$name" ]]; then
        echo "deploy-tools.sh: go install $pkg@$version" >&2
        local tmp
        tmp="$(mktemp -d "$CACHE/.tmp-$name.XXXXXX")"
        # pins: checked -- an exact vX.Y.Z, refused above otherwise
        CGO_ENABLED=0 GOBIN="$tmp" go install "$pkg@$version" >&2 ||
            { rm -rf "$tmp"; die "go install $pkg@$version failed"; }
        rm -rf "$dir"
        mv "$tmp" "$dir"
    fi
    echo "$dir/$name"
}

helm="$(go_tool helm helm.sh/helm/v4/cmd/helm "$HELM_VERSION")"
kubeconform="$(go_tool kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION")"

venv="$("$ROOT/scripts/pylock.sh" venv deploy)" || die "could not install scripts/pylock/deploy.txt"

# The schema set is keyed by its sources' versions and the converter's content, so a change
# to any of them makes a new one.
converter="$ROOT/deploy/tests/k8s_schemas.py"
key="$( (echo "$KUBE_VERSIONS" && cat "$converter") | sha256sum | cut -c1-12)"
schemas="$CACHE/schemas-kv$KUBERNETES_VALIDATE_VERSION-po$PROMETHEUS_OPERATOR_API_VERSION-$key"
if [[ ! -f "$schemas/.complete" ]]; then
    echo "deploy-tools.sh: Kubernetes and ServiceMonitor JSON schemas" >&2
    tmp="$(mktemp -d "$CACHE/.tmp-schemas.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    grep -q "^kubernetes-validate==$KUBERNETES_VALIDATE_VERSION " "$ROOT/scripts/pylock/kubernetes-validate.txt" ||
        die "scripts/pylock/kubernetes-validate.txt does not lock kubernetes-validate $KUBERNETES_VALIDATE_VERSION"
    "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --require-hashes \
        --only-binary=:all: -d "$tmp/wheel" -r "$ROOT/scripts/pylock/kubernetes-validate.txt" ||
        die "pip download of scripts/pylock/kubernetes-validate.txt failed"

    controller_gen="$(go_tool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_GEN_VERSION")"
    api_mod=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring
    api_dir="$(go mod download -json "$api_mod@$PROMETHEUS_OPERATOR_API_VERSION" |
        "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')" ||
        die "go mod download $api_mod@$PROMETHEUS_OPERATOR_API_VERSION failed"
    # controller-gen loads the packages from the module's own directory (read-only: it writes
    # only to output:crd:dir); `go` fetches the module's dependencies as it needs them.
    (cd "$api_dir" && "$controller_gen" crd:crdVersions=v1 paths=./v1 output:crd:dir="$tmp/crds") ||
        die "controller-gen could not generate the Prometheus Operator CRDs"

    versions=()
    for v in $KUBE_VERSIONS; do versions+=(--kube-version "$v"); done
    "$venv/bin/python" "$converter" --wheel "$tmp"/wheel/*.whl "${versions[@]}" \
        --crds "$tmp/crds" --out "$tmp/out" ||
        die "converting the schemas failed"
    touch "$tmp/out/.complete"
    rm -rf "$schemas"
    mv "$tmp/out" "$schemas"
    rm -rf "$tmp"
    trap - EXIT
fi

printf 'HELM=%q\nKUBECONFORM=%q\nDEPLOY_PYTHON=%q\nK8S_SCHEMAS=%q\nKUBE_VERSIONS=%q\n' \
    "$helm" "$kubeconform" "$venv/bin/python" "$schemas" "$KUBE_VERSIONS"
