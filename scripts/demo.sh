#!/usr/bin/env bash
# `make pipeline-demo`: the single commands the campaign runner sequences, one by one (`make demo`
# runs the same procedure as one campaign: scripts/campaign-demo.sh). On a generated campaign:
# validate runs, select pooled runs, pool (depth-10 over near-duplicate classes, shallow top-1, fractional), describe the pool, make assessor batches,
# judge them with a simulated assessor, import the labels, propagate them to near-duplicates and documents,
# score and compare every run, the reusability report (leave-one-group-out), and a preference round
# (pairs from a top-1 pool, crowd tasks, simulated workers, tournament, win ratios, re-scoring, maintenance).
# Usage: scripts/demo.sh [OUT_DIR]   (default demo-pipeline; QRELKIT=path/to/qrelkit to use a given executable)
source "$(dirname "$0")/demo-lib.sh"
OUT=${1:-demo-pipeline}
C=$OUT/campaign
fresh_dir "$OUT"

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

step "9. propagate the final qrels: to near-duplicates (expanded qrels) and to documents (max rule)"
$Q labels expand "$OUT/qrels-round1.txt" --classes "$OUT/classes.parquet" -c $CFG -o "$OUT/qrels-expanded.txt" \
   --report-out "$OUT/expansion-per-topic.csv"
$Q labels propagate "$OUT/qrels-round1.txt" --corpus "$C/corpus.jsonl" --classes "$OUT/classes.parquet" -c $CFG \
   -o "$OUT/qrels-documents.txt" --disagree-out "$OUT/documents-disagree.csv" --examples 3

step "10. score every run with ir-measures (expanded qrels), compare runs with the baseline, duplicates in evaluation"
$Q eval score "$C/runs" -q "$OUT/qrels-expanded.txt" -c $CFG -o "$OUT/eval-per-query.parquet" \
   --summary-out "$OUT/eval-summary.csv" -m nDCG@10 -m AP -m RR@10 -m NCG@100 -m Judged@10
$Q eval compare "$C/runs" -q "$OUT/qrels-expanded.txt" -c $CFG -m nDCG@10 --baseline p_bm25 --randomizations 2000 \
   -o "$OUT/eval-significance.csv" --breakdown-out "$OUT/eval-breakdown.csv" --json > "$OUT/eval-compare.json"
$Q eval duplicates "$C/runs" -q "$OUT/qrels-round1.txt" --classes "$OUT/classes.parquet" -c $CFG --depth 100 \
   -o "$OUT/eval-duplicates.csv" --plot "$OUT/eval-duplicates.png" --json > "$OUT/eval-duplicates.json"

step "11. reusability: leave-one-group-out over the judged depth-10 pool, and the report (Markdown, HTML, plots, tables)"
$Q reuse leave-out "$C/runs" -m "$OUT/selection.csv" -q "$OUT/qrels-round1.txt" --pool "$OUT/pool-depth10.parquet" \
   --classes "$OUT/classes.parquet" -c $CFG -o "$OUT/reuse"

step "12. preference round (docs/protocol.md section 2): sparse labels (one relevant passage per topic), top-1 pool, pairs, cost, tasks"
P=$OUT/prefs
mkdir -p "$P"
printf '[selection]\nper_group = 1\n' > "$P/first-runs.toml"
$Q prefs sparsify "$C/qrels.txt" --per-topic 1 --min-rel 2 -c $CFG --seed 7 -o "$P/sparse-qrels.txt"
$Q pool top1 "$C/runs" -m "$C/manifest.csv" -c "$P/first-runs.toml" --classes "$OUT/classes.parquet" \
   -q "$P/sparse-qrels.txt" -o "$P/pool-top1.parquet"
$Q prefs pairs "$P/pool-top1.parquet" -c $CFG -o "$P/pairs.parquet"
$Q prefs tasks "$P/pairs.parquet" -q "$P/sparse-qrels.txt" --corpus "$C/corpus.jsonl" --topics "$C/topics.tsv" -c $CFG \
   -o "$P/tasks.parquet" --export "$P/tasks.csv"

step "12b. simulated workers answer from the hidden graded qrels; W04 fails test pairs: excluded, its tasks re-issued"
$Q prefs simulate "$P/tasks.parquet" -q "$C/qrels.txt" --workers 4 --failing W04 -c $CFG -o "$P/answers.csv"
$Q prefs import "$P/answers.csv" --tasks "$P/tasks.parquet" -c $CFG -o "$P/judgments-1.parquet" \
   --reissue-out "$P/tasks-r1.parquet" --reissue-export "$P/tasks-r1.csv"
$Q prefs simulate "$P/tasks-r1.parquet" -q "$C/qrels.txt" --workers 4 --failing W04 -c $CFG -o "$P/answers-r1.csv"
$Q prefs import "$P/answers.csv" "$P/answers-r1.csv" --tasks "$P/tasks.parquet" --tasks "$P/tasks-r1.parquet" -c $CFG \
   -o "$P/judgments.parquet" --workers-out "$P/workers.csv"

step "12c. tournament -> preference qrels; win ratios with the perfect run; re-scored leaderboard (MRR@10, tau, 95% CIs)"
$Q prefs tournament "$P/judgments.parquet" --pool "$P/pool-top1.parquet" -c $CFG -o "$P/prefs-qrels.txt" \
   --log-out "$P/tournament-log.csv" --queries-out "$P/tournament-topics.csv"
$Q prefs winratio "$P/judgments.parquet" --pool "$P/pool-top1.parquet" -c $CFG -o "$P/winratio.csv" \
   --matrix-out "$P/winratio-matrix.csv" --plot "$P/winratio.png"
$Q prefs rescore "$C/runs" -q "$P/sparse-qrels.txt" --prefs "$P/prefs-qrels.txt" --classes "$OUT/classes.parquet" -c $CFG \
   -o "$P/leaderboard.csv" --plot "$P/rescore.png" --json > "$P/rescore.json"

step "12d. maintenance: the other pooled runs surface new top passages, each judged against the current best answers"
$Q pool top1 "$C/runs" -m "$C/manifest.csv" --classes "$OUT/classes.parquet" -q "$P/sparse-qrels.txt" -c $CFG \
   -o "$P/pool-top1-m1.parquet"
$Q prefs pairs "$P/pool-top1-m1.parquet" --best "$P/prefs-qrels.txt" --previous "$P/pool-top1.parquet" -c $CFG \
   -o "$P/pairs-m1.parquet"
$Q prefs tasks "$P/pairs-m1.parquet" -q "$P/sparse-qrels.txt" --prefix M -c $CFG -o "$P/tasks-m1.parquet"
$Q prefs simulate "$P/tasks-m1.parquet" -q "$C/qrels.txt" --workers 3 -c $CFG -o "$P/answers-m1.csv"
$Q prefs import "$P/answers-m1.csv" --tasks "$P/tasks-m1.parquet" -c $CFG -o "$P/judgments-m1.parquet"
$Q prefs tournament "$P/judgments-m1.parquet" --pairs "$P/pairs-m1.parquet" --best "$P/prefs-qrels.txt" -c $CFG \
   -o "$P/prefs-qrels-m1.txt" --log-out "$P/tournament-m1-log.csv"

step "13. CAL (docs/protocol.md section 1, step 4): features once; a judging store holding the pool judgments; one round"
$Q cal features "$C/corpus.jsonl" --classes "$OUT/classes.parquet" -c $CFG -o "$OUT/cal.db.features"
$Q cal init "$OUT/cal.db" --topics "$C/topics.tsv" -c $CFG
$Q cal import "$OUT/cal.db" "$OUT/judgments.parquet" -c $CFG
$Q cal next "$OUT/cal.db" --assessor A01 -c $CFG -o "$OUT/cal-batch-1.parquet"
$Q simulate judge "$OUT/cal-batch-1.parquet" -q "$C/qrels.txt" --seed 7 -o "$OUT/cal-batch-1-done.parquet"
$Q cal import "$OUT/cal.db" "$OUT/cal-batch-1-done.parquet" -c $CFG
$Q cal status "$OUT/cal.db" --thread all -c $CFG -o "$OUT/cal-status.csv" > /dev/null
head -6 "$OUT/cal-status.csv"

step "13b. the campaign judged by CAL in three threads until the density rule stops each topic (simulated assessor)"
$Q cal simulate "$OUT/cal.db.features" -t "$C/topics.tsv" -q "$C/qrels.txt" --initial "$OUT/qrels-round1.txt" \
   --threads fractional,local,all --rule density --rule knee --stop-when density --budget 400 --max-effort 400 \
   -c $CFG --seed 7 -o "$OUT/cal-sim"

step "done: outputs in $OUT/"
ls -1 "$OUT"
