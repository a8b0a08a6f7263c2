#!/usr/bin/env bash
# `make demo`: the demo as one campaign (docs/campaign.md): generate a campaign, then `campaign init`,
# `campaign run --oracle` (a simulated assessor answers every batch) and `campaign report`; it ends with
# an organizer's login link and how to start `qrelkit serve` on the campaign (docs/web.md).
# Usage: scripts/campaign-demo.sh [OUT_DIR]   (default demo-out; QRELKIT=path/to/qrelkit to use a given
# executable; PASSAGES and TOPICS to size the generated campaign)
source "$(dirname "$0")/demo-lib.sh"
OUT=${1:-demo-out}
S=$OUT/simulated
fresh_dir "$OUT"

step "1. simulate a campaign (corpus with near-duplicates, topics, hidden qrels, runs of 8 groups)"
$Q simulate campaign -o "$S" --passages ${PASSAGES:-50000} --topics ${TOPICS:-30} --groups 8 --seed 1

step "2. campaign init: validate every input, record them (path, size, sha256) and the configuration"
$Q campaign init "$OUT/campaign" -c $CFG --corpus "$S/corpus.jsonl" -t "$S/topics.tsv" --runs "$S/runs" \
   -m "$S/manifest.csv"

step "3. campaign run: every stage; a simulated assessor (error rate 0.05) answers each batch"
$Q campaign run "$OUT/campaign" --oracle "$S/qrels.txt" --error-rate 0.05 --seed 7 --json > "$OUT/run.json"

step "4. status per topic, and the report (HTML with embedded figures, and its Markdown twin)"
$Q campaign status "$OUT/campaign" -o "$OUT/status.csv"
$Q campaign report "$OUT/campaign" -o "$OUT/report.html"

step "5. the web app (docs/web.md): an organizer's login link and assessor A01's"
$Q campaign assessor add "$OUT/campaign" organizer --organizer
$Q campaign assessor add "$OUT/campaign" A01
echo "start the server with: $Q serve $OUT/campaign   (then open a link above in a browser)"

step "done: the campaign in $OUT/campaign, the report in $OUT/report.html"
