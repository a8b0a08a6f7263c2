#!/usr/bin/env bash
# End-to-end demo on a generated campaign: validate runs, select pooled runs, pool (depth-10 over
# near-duplicate classes, shallow top-1, fractional), describe the pool, make assessor batches,
# judge them with a simulated assessor, import the labels.
# Usage: scripts/demo.sh [OUT_DIR]   (QRELKIT=path/to/qrelkit to use a given executable)
set -euo pipefail
Q=${QRELKIT:-qrelkit}
OUT=${1:-demo-out}
CFG=configs/trec-dl-2022.toml
C=$OUT/campaign
rm -rf "$OUT"
mkdir -p "$OUT"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. simulate a campaign (corpus with near-duplicates, topics, hidden qrels, runs of 8 groups)"
$Q simulate campaign -o "$C" --passages 50000 --topics 30 --groups 8 --seed 1

step "2. validate the submitted runs against the manifest and topics"
$Q runs validate "$C/runs" -m "$C/manifest.csv" -t "$C/topics.tsv" -c $CFG -o "$OUT/run-issues.csv"

step "2b. near-duplicate classes of the corpus (MinHash/LSH), checked against the simulator's truth"
$Q dedupe cluster "$C/corpus.jsonl" -c $CFG -o "$OUT/classes.parquet" --nist-out "$OUT/classes.nist.txt" \
   --index-out "$OUT/dedupe-index"
$Q dedupe stats "$OUT/classes.parquet" --largest 3 -o "$OUT/class-sizes.csv" --json > "$OUT/class-stats.json"
$Q dedupe evaluate "$OUT/classes.parquet" --truth "$C/neardup_truth.tsv" --corpus "$C/corpus.jsonl"

step "3. select the runs that feed the pool (baselines + 3 per group and subtask)"
$Q pool select -m "$C/manifest.csv" -c $CFG -o "$OUT/selection.csv"

step "4. depth-10 pool over near-duplicate classes, with provenance"
$Q pool depth "$C/runs" -m "$C/manifest.csv" --classes "$OUT/classes.parquet" -c $CFG -o "$OUT/pool-depth10.parquet"
$Q pool stats "$OUT/pool-depth10.parquet" -m "$C/manifest.csv" -o "$OUT/pool-stats"

step "5. shallow top-1 pool with the perfect run"
$Q pool top1 "$C/runs" -m "$C/manifest.csv" -q "$C/qrels.txt" --perfect best -c $CFG -o "$OUT/pool-top1.parquet"

step "6. assessor batches: first 100 per topic, then the rest; 4 assessors"
$Q batch make "$OUT/pool-depth10.parquet" --corpus "$C/corpus.jsonl" --topics "$C/topics.tsv" \
   --assessors 4 -c $CFG --seed 7 -o "$OUT/batches.csv" --per-assessor-dir "$OUT/batches"

step "7. a simulated assessor judges the batches; labels come back in"
$Q simulate judge "$OUT/batches.csv" -q "$C/qrels.txt" --error-rate 0.05 --seed 7 -o "$OUT/completed.csv"
$Q batch import "$OUT/completed.csv" --issued "$OUT/batches.csv" -c $CFG -o "$OUT/judgments.parquet" \
   --qrels-out "$OUT/qrels-round1.txt"

step "8. fractional collection: 1/10 of the deduplicated corpus, pool of the restricted runs minus what is judged"
$Q pool fractional "$C/runs" -m "$C/manifest.csv" --corpus "$C/corpus.jsonl" --classes "$OUT/classes.parquet" \
   -q "$OUT/qrels-round1.txt" -c $CFG -o "$OUT/pool-fractional.parquet" --ids-out "$OUT/fraction-ids.parquet"

step "done: outputs in $OUT/"
ls -1 "$OUT"
