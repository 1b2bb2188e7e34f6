#!/usr/bin/env bash
# A nightly CI job: run campaigns/nightly.toml against the reference cluster, PostgreSQL and MariaDB,
# judge it with Spark, and leave the JUnit XML and the campaign page where the CI system
# collects them. Any CI calls it the same way, e.g. a cron-triggered job:
#
#   SLEUTH_STORE=/var/lib/sleuth/store ci/nightly.sh        # keep the store between nights: trends
#
# Environment: SLEUTH_STORE (default ./store; keep it between nights for the trend plots),
# SPARK_MASTER (spark://HOST:PORT; default embedded local[*]), ARTIFACTS (default ./artifacts),
# CAMPAIGN (default campaigns/nightly.toml). Needs what .ci/run installs (PostgreSQL, MariaDB, Java 17,
# iptables for the partition nemesis).
#
# Exit status is the campaign's (Jepsen's test-all): 0 all passed (bugs switched on were caught),
# 1 an anomaly or a missed bug, 2 unknown or interrupted, 254 bad campaign file, 255 sleuth crashed.
# An interrupted night (the CI job cancelled) is continued by the next call with RESUME=1.
set -uo pipefail
cd "$(dirname "$0")/.."
STORE="${SLEUTH_STORE:-store}"
ARTIFACTS="${ARTIFACTS:-artifacts}"
CAMPAIGN="${CAMPAIGN:-campaigns/nightly.toml}"
make install >/dev/null || exit 255

args=("$CAMPAIGN" --store "$STORE" --json)
[ -n "${SPARK_MASTER:-}" ] && args+=(--spark-master "$SPARK_MASTER")
[ -n "${RESUME:-}" ] && args+=(--resume)

mkdir -p "$ARTIFACTS"
.venv/bin/sleuth campaign "${args[@]}" > "$ARTIFACTS/campaign.json"
status=$?

# The campaign directory (page, junit.xml, campaign.csv, every run) goes to the artifacts.
dir=$(.venv/bin/python -c 'import json,sys; print(json.load(open(sys.argv[1]))["dir"])' \
      "$ARTIFACTS/campaign.json" 2>/dev/null) || dir=""
if [ -n "$dir" ]; then
    cp "$dir/junit.xml" "$ARTIFACTS/junit.xml"
    tar -C "$(dirname "$dir")" -czf "$ARTIFACTS/campaign.tar.gz" "$(basename "$dir")"
    echo "campaign page: $dir/index.html (in $ARTIFACTS/campaign.tar.gz)" >&2
fi
exit "$status"
