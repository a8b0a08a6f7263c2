"""``qrelkit batch``: assessor batches out, completed labels back in."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from qrelkit.cli import HELP, common
from qrelkit.errors import InputError, repair_counts
from qrelkit.labels.params import LabelsParams
from qrelkit.pooler import BatchParams

app = typer.Typer(help=HELP["batch"], no_args_is_help=True)


@app.command("make")
def make(
    pool: Path = typer.Argument(..., help="A pool table (.parquet) in assessor order."),
    output: Path = typer.Option(..., "-o", "--output", help="Batch table: .csv, .jsonl or .parquet."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Corpus to join passage texts from (streamed)."),
    topics: Optional[Path] = typer.Option(None, "--topics", "-t", help="Topics file for the query texts."),
    first_n: Optional[int] = typer.Option(None, "--first-n", help=f"First batch per topic: this many items (default: {common.default_of('batch', 'first_n')})."),
    assessors: Optional[int] = typer.Option(None, "--assessors", help="Number of assessors (named A01, A02, ...)."),
    names: Optional[str] = typer.Option(None, "--assessor-names", help="Comma-separated assessor names."),
    per_item: Optional[int] = typer.Option(None, "--per-item", help=f"Assessors per item (default: {common.default_of('batch', 'assessors_per_item')})."),
    per_assessor_dir: Optional[Path] = typer.Option(None, "--per-assessor-dir", help="Also write one file per assessor here."),
    lenient: bool = typer.Option(False, "--lenient/--strict", help="Drop pool items whose passage has no text in the --corpus (counted) instead of failing."),
    seed: Optional[int] = common.SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Split each topic's pool into batches (first N, then the rest) for k assessors each,
    in a seeded random order per assessor, with passage texts. With --corpus, a pool passage
    that the corpus lacks or holds with an empty text is an error ([missing-passage]): no
    assessor is handed a blank passage."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.corpus import lookup_texts  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import read_table, write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.topics import read_topics  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.pooler import make_batches, require_texts  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[pool, corpus, topics, config], outputs=[output], folders=[per_assessor_dir])
    cfg = common.config(config)
    t = read_table(pool)
    for col in ("qid", "docid", "position"):
        if col not in t.column_names:
            raise InputError("missing-column", f"not a pool table (no column {col!r})", file=str(pool))
    bp = BatchParams.from_config(cfg, first_n=first_n, assessors_per_item=per_item, seed=seed)
    s, n, k = bp.seed, bp.first_n, bp.assessors_per_item
    who = [n.strip() for n in names.split(",")] if names else (assessors or max(k, 1))
    texts, dropped = None, 0
    if corpus is not None:
        with common.progress("joining passage texts", None):
            texts = lookup_texts(corpus, set(t["docid"].to_pylist()))
        t, dropped = require_texts(t, texts, corpus=corpus, lenient=lenient)
    queries = dict(zip(*read_topics(topics)[["qid", "text"]].T.values)) if topics else None
    batches = make_batches(t, first_n=n, assessors=who, per_item=k, seed=s, texts=texts, queries=queries)
    params = {"pool": str(pool), "corpus": str(corpus) if corpus else None, "first_n": n, "assessors": who,
              "per_item": k, "seed": s}
    table = pa.Table.from_pandas(batches, preserve_index=False)
    write_table(table, output, kind="batches", params=params)
    if per_assessor_dir is not None:
        ext = output.suffix or ".csv"
        for a, part in batches.groupby("assessor", sort=True):
            write_table(pa.Table.from_pandas(part, preserve_index=False), per_assessor_dir / f"{a}{ext}",
                        kind="batches", params={**params, "assessor": a})
    summary = {"output": str(output), "rows": len(batches), "batches": int(batches["batch_id"].nunique()),
               "assessors": int(batches["assessor"].nunique()), "texts_missing": 0 if corpus is not None else None}
    common.report_repairs({"missing-passage": dropped}, summary)
    common.emit(summary, as_json, f"wrote {len(batches)} rows in {summary['batches']} batches for "
                f"{summary['assessors']} assessors -> {output}")


@app.command("import")
def import_(
    files: List[Path] = typer.Argument(..., help="Completed batch files (.csv, .tsv, .jsonl, .parquet)."),
    output: Path = typer.Option(..., "-o", "--output", help="Judgments table (.parquet/.csv/.tsv)."),
    issued: Optional[Path] = typer.Option(None, "--issued", help="The batch table as issued: unknown items are rejected."),
    scale: Optional[str] = typer.Option(None, "--scale", help="Allowed grades, comma-separated (default: config)."),
    lenient: bool = typer.Option(False, "--lenient/--strict", help="Drop bad rows and report counts instead of failing."),
    qrels_out: Optional[Path] = typer.Option(None, "--qrels-out", help="Also write TREC qrels (one grade per item)."),
    combine: str = typer.Option("median_high", "--combine", help="Several assessors' grades -> one: median_high | max | min."),
    force: bool = common.ForceOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Read completed batches into a judgments table (qid, docid, assessor, grade, batch_id).
    Files with no graded row replace no existing output that holds rows ([empty-result])
    unless --force."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.qrels import write_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_table, write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.pooler import import_batches  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.pooler.batches import import_empty_reason  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.store.combine import judgments_to_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[files, issued, config], outputs=[output, qrels_out])
    cfg = common.config(config)
    sc = [int(x) for x in scale.split(",")] if scale else list(LabelsParams.from_config(cfg).scale)
    iss = read_table(issued).to_pandas() if issued else None
    judgments, report = import_batches(files, issued=iss, scale=sc, lenient=lenient)
    counts = dict(zip(report["rule"], report["count"].astype(int)))
    common.refuse_empty_result([output, qrels_out], import_empty_reason(judgments, counts), force=force)
    write_table(pa.Table.from_pandas(judgments, preserve_index=False), output, kind="judgments",
                params={"files": [str(f) for f in files], "issued": str(issued) if issued else None, "scale": sc})
    if qrels_out is not None:
        q = judgments_to_qrels(judgments, combine=combine)
        if qrels_out.suffix == ".parquet":
            write_table(q, qrels_out, kind="qrels", params={"files": [str(f) for f in files], "combine": combine})
        else:
            write_qrels(q, qrels_out)
    summary = {"output": str(output), **counts}
    common.report_repairs(repair_counts(counts), summary)
    common.emit(summary, as_json,
                f"imported {counts.get('imported', 0)} judgments -> {output} ({counts})")
