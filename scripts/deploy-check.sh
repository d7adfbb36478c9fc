#!/usr/bin/env bash
# Checks what deploy/ ships, offline, with pinned tools (scripts/deploy-tools.sh installs them
# on a fresh machine; a tool that cannot be installed fails this script, never skips it):
#
#   1. the Containerfiles name only paths, packages and binaries that exist, copy everything
#      their cargo builds reach, and run as non-root (deploy/tests/check_containerfiles.py);
#   2. `helm lint --strict` of deploy/helm/converge with its default values and with each
#      values file in its ci/ folder;
#   3. `helm template` of the same, each validated by kubeconform -strict against the
#      Kubernetes schemas of the oldest and newest supported release and the ServiceMonitor
#      CRD's schema, and checked against what converge expects (deploy/tests/check_chart.py);
#   4. values the schema must refuse are refused, naming what is wrong.
#
#   scripts/deploy-check.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

tools="$(scripts/deploy-tools.sh)" || { echo "deploy-check.sh: installing the tools failed" >&2; exit 1; }
eval "$tools"

CHART=deploy/helm/converge
RELEASE=demo
NAMESPACE=converge
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
fail() {
    echo "deploy-check.sh: FAILED: $*" >&2
    failed=1
}

echo "==> Containerfiles" >&2
"$DEPLOY_PYTHON" deploy/tests/check_containerfiles.py "$ROOT" Containerfile stdworker/Containerfile ||
    fail "Containerfile checks"

# render NAME [HELM ARGS...]: lints and renders the chart into $work/NAME.yaml.
oldest="${KUBE_VERSIONS%% *}"
render() {
    local name="$1"
    shift
    echo "==> helm lint/template: $name" >&2
    "$HELM" lint --strict --kube-version "$oldest" "$CHART" "$@" >"$work/$name.lint" 2>&1 ||
        { cat "$work/$name.lint" >&2; fail "helm lint ($name)"; return 0; }
    "$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" --kube-version "$oldest" "$@" \
        >"$work/$name.yaml" || { fail "helm template ($name)"; return 0; }
}

# validate NAME [--external-secret S ...]: kubeconform and the chart's own checks.
validate() {
    local name="$1"
    shift
    [[ -s "$work/$name.yaml" ]] || return 0
    local v
    for v in $KUBE_VERSIONS; do
        "$KUBECONFORM" -strict -summary -kubernetes-version "$v" \
            -schema-location "$K8S_SCHEMAS" \
            -schema-location "$K8S_SCHEMAS/crds/{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json" \
            "$work/$name.yaml" || fail "kubeconform ($name, Kubernetes $v)"
    done
    "$DEPLOY_PYTHON" deploy/tests/check_chart.py "$work/$name.yaml" "$@" || fail "chart checks ($name)"
}

render defaults
# With neither database.url nor database.existingSecret the pods wait for this one.
validate defaults --external-secret "$RELEASE-converge-database"

render everything -f "$CHART/ci/everything-values.yaml"
validate everything
# Every kind the chart can render is in this one (ServiceMonitor included).
for kind in Deployment Service PodDisruptionBudget ServiceMonitor Secret ServiceAccount; do
    grep -q "^kind: $kind\$" "$work/everything.yaml" 2>/dev/null || fail "everything-values renders no $kind"
done

render existing-secrets -f "$CHART/ci/existing-secrets-values.yaml"
validate existing-secrets --external-secret converge-db --external-secret converge-auth \
    --external-secret converge-tls --external-secret converge-db-replica \
    --external-secret converge-secrets-key
# The secrets key and, during a rotation, the old one: files of the mounted Secret.
grep -q 'value: "/etc/converge/secrets-key/current.key"' "$work/existing-secrets.yaml" ||
    fail "existing-secrets-values renders no SECRETS_KEY_FILE"
grep -q 'value: "/etc/converge/secrets-key/previous.key"' "$work/existing-secrets.yaml" ||
    fail "existing-secrets-values renders no SECRETS_OLD_KEY_FILES"
grep -q 'name: SECRETS_KEY_FILE' "$work/everything.yaml" ||
    fail "everything-values renders no SECRETS_KEY_FILE"
# The read replica goes to control pods only.
grep -q 'name: DATABASE_READ_URL' "$work/existing-secrets.yaml" ||
    fail "existing-secrets-values renders no DATABASE_READ_URL"

# terminationGracePeriodSeconds follows SHUTDOWN_DRAIN (check_chart.py compares them).
render long-drain --set broker.shutdownDrainSeconds=600 --set broker.preStopSleepSeconds=5
validate long-drain --external-secret "$RELEASE-converge-database"
grep -q 'terminationGracePeriodSeconds: 620$' "$work/long-drain.yaml" ||
    fail "a 600 s drain with a 5 s sleep and 15 s slack should give a 620 s grace period"

# refused WHAT EXPECTED [HELM ARGS...]: the chart must refuse these values, saying EXPECTED.
refused() {
    local what="$1" expected="$2"
    shift 2
    echo "==> refused: $what" >&2
    if "$HELM" template "$RELEASE" "$CHART" --kube-version "$oldest" "$@" >"$work/refused.out" 2>&1; then
        fail "values with $what were accepted"
    elif ! grep -q -- "$expected" "$work/refused.out"; then
        cat "$work/refused.out" >&2
        fail "values with $what were refused without naming $expected"
    fi
}
refused "a chart-managed variable in env" "ROLE" --set env.ROLE=all
refused "a chart-managed variable in broker.env" "SHUTDOWN_DRAIN" --set broker.env.SHUTDOWN_DRAIN=10s
refused "a drain given as a duration string" "shutdownDrainSeconds" --set-string broker.shutdownDrainSeconds=45s
refused "a misspelt key" "brokr" --set brokr.replicas=3
refused "a replica lag without a unit" "maxLag" --set-string database.readReplica.maxLag=5
refused "a drain on control pods" "shutdownDrainSeconds" --set control.shutdownDrainSeconds=30
refused "TLS without a certificate" "cert" --set tls.enabled=true
refused "a principal without a credential" "principals" --set 'auth.principals[0].name=ops' \
    --set 'auth.principals[0].role=admin'
refused "a token instead of its hash" "token_sha256" --set 'auth.principals[0].name=ops' \
    --set 'auth.principals[0].role=admin' --set 'auth.principals[0].token_sha256=secret-token'
refused "a database URL that is not one" "url" --set database.url=db.example:5432
refused "a secrets key that is not 32 bytes of base64" "key" --set secretsKey.key=short
refused "the secrets key file set in env" "SECRETS_KEY_FILE" --set env.SECRETS_KEY_FILE=/k

if ((failed)); then
    exit 1
fi
echo "deploy-check.sh: Containerfiles and chart ok (Kubernetes ${KUBE_VERSIONS// /, })" >&2
