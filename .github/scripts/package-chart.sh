#!/usr/bin/env bash
# Package the Helm chart for a release: chart version and appVersion from the tag, and the runbook links
# (alerts.runbookBaseUrl's default, which every alert's runbook_url follows) pointing at that tag's docs instead of
# main's, so an alert fired by release X links the runbook of release X. The repository's chart is left as it is (a staged copy
# is packaged). Used by .github/workflows/release.yaml; tests/chart/test_release.py runs it.
#
#   .github/scripts/package-chart.sh VERSION OUTDIR      (VERSION without the leading v, e.g. 0.2.0)
set -euo pipefail

version="${1:?usage: package-chart.sh VERSION OUTDIR}"
out="${2:?usage: package-chart.sh VERSION OUTDIR}"
if [[ ! "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "package-chart.sh: '$version' is not a semantic version (e.g. 0.2.0 or 0.2.0-rc.1; no leading v)" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
helm="${HELM:-helm}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

cp -R "$root/charts/specserve" "$stage/specserve"
main="https://github.com/specserve/specserve/blob/main/docs/runbooks"
tagged="https://github.com/specserve/specserve/blob/v${version}/docs/runbooks"
# Only the default of alerts.runbookBaseUrl: the PrometheusRule template points the rules' main-branch links at
# that value, so a user's own runbookBaseUrl still replaces them in a released chart.
values="$stage/specserve/values.yaml"
grep -q "runbookBaseUrl: ${main}\$" "$values" || { echo "package-chart.sh: no runbookBaseUrl default to rewrite in $values" >&2; exit 1; }
sed -i.bak "s#runbookBaseUrl: ${main}\$#runbookBaseUrl: ${tagged}#" "$values" && rm -f "$values.bak"
mkdir -p "$out"
"$helm" lint --strict "$stage/specserve" >/dev/null
"$helm" package "$stage/specserve" --version "$version" --app-version "$version" --destination "$out"
