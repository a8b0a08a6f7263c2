"""``qrelkit labels``: aggregate assessors' grades, binarize, propagate to duplicates and documents."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from qrelkit.cli import HELP, common
from qrelkit.errors import InputError
from qrelkit.labels.params import LabelsParams

if TYPE_CHECKING:  # names for annotations only: importing them loads pyarrow and pandas
    import pyarrow as pa

app = typer.Typer(help=HELP["labels"], no_args_is_help=True)

QrelsArg = typer.Argument(..., help="Qrels (TREC text, .gz, or Parquet with qid, docid, rel).")


def write_qrels_any(table: pa.Table, path: Path, *, kind: str, params: dict) -> None:
    """TREC qrels text, or a table by extension (.parquet with parameters, .csv, .tsv, .jsonl)."""
    from qrelkit.io.qrels import write_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    if path.suffix.lower() in (".parquet", ".csv", ".tsv", ".jsonl"):
        write_table(table, path, kind=kind, params=params)
    else:
        write_qrels(table, path)


def _frame_out(df, path: Optional[Path], kind: str, params: dict) -> None:
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    if path is not None:
        write_table(pa.Table.from_pandas(df, preserve_index=False), path, kind=kind, params=params)


def _kv(summary: dict):
    """A summary dict as a two-column table (statistic, value), floats to 4 decimals."""
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    rows = [(k, f"{v:.4f}" if isinstance(v, float) else str(v)) for k, v in summary.items()]
    return pd.DataFrame(rows, columns=["statistic", "value"])


def _read_judgments(files: List[Path]) -> pa.Table:
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    tables = []
    for f in files:
        t = read_table(f)
        for c in ("qid", "docid", "assessor", "grade"):
            if c not in t.column_names:
                raise InputError("missing-column", f"judgments need columns qid, docid, assessor, grade (missing {c!r})",
                                 file=str(f))
        tables.append(pa.table({c: pa.compute.cast(t[c], pa.string()) for c in ("qid", "docid", "assessor", "grade")}))
    return pa.concat_tables(tables)


@app.command("aggregate")
def aggregate(
    judgments: List[Path] = typer.Argument(..., help="Judgments tables (qid, docid, assessor, grade), e.g. from 'batch import'."),
    output: Path = typer.Option(..., "-o", "--output", help="Label table (.parquet/.csv/.tsv/.jsonl): one row per (topic, passage)."),
    qrels_out: Optional[Path] = typer.Option(None, "--qrels-out", help="Also write qrels of the included topics."),
    topics_out: Optional[Path] = typer.Option(None, "--topics-out", help="Also write the per-topic inclusion table."),
    original: Optional[Path] = typer.Option(None, "--original", help="Original qrels: fallback 'original' and inclusion."),
    threshold: Optional[int] = typer.Option(None, "--threshold", help=f"A grade >= this is a vote for relevant (default: {common.default_of('labels', 'vote_threshold')})."),
    graded: Optional[str] = typer.Option(None, "--graded", help="Graded label: ceil_median | median_high."),
    fallback: Optional[str] = typer.Option(None, "--fallback", help="No majority: chain of original, lowest, highest, not-relevant, relevant, drop."),
    original_threshold: Optional[int] = typer.Option(None, "--original-threshold", help="Original grade that counts as relevant."),
    min_assessors: Optional[int] = typer.Option(None, "--min-assessors", help="A topic needs at least this many assessors."),
    require_original: Optional[bool] = typer.Option(None, "--require-original-relevant/--no-require-original-relevant",
                                                    help="A topic needs its original relevant qrel judged relevant."),
    label: Optional[str] = typer.Option(None, "--label", help="Grade written to --qrels-out: graded | binary."),
    force: bool = common.ForceOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Several assessors' grades -> one label per (topic, passage): majority vote after
    binarizing (ties -> fallback chain), ceiled median (or median_high) as graded label,
    topic inclusion rules. An aggregation that includes no topic replaces no existing output
    that holds rows ([empty-result]) unless --force."""
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.labels import aggregate_judgments, aggregation_options, labels_to_table  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[judgments, original, config], outputs=[output, qrels_out, topics_out])
    cfg = common.config(config)
    j = _read_judgments(judgments)
    orig = read_qrels(original) if original else None
    lp = LabelsParams.from_config(cfg, vote_threshold=threshold, graded=graded, fallback=fallback, label=label,
                                  original_threshold=original_threshold, min_assessors=min_assessors,
                                  require_original_relevant=require_original)
    params = aggregation_options(lp)
    agg = aggregate_judgments(j, original=orig, **params)
    s = agg.summary()
    common.refuse_empty_result([output, qrels_out], s["reason"], force=force)
    lab = lp.label
    meta = {**params, "judgments": [str(f) for f in judgments], "original": str(original) if original else None,
            "config": cfg.source}
    write_table(labels_to_table(agg.labels), output, kind="labels", params=meta)
    if qrels_out is not None:
        write_qrels_any(agg.qrels(lab), qrels_out, kind="qrels", params={**meta, "label": lab})
    _frame_out(agg.topics, topics_out, "label-topics", meta)
    if s["empty"]:  # the files are still written (empty), and the reason said
        sys.stderr.write(f"qrelkit: warning: the aggregated qrels are empty: {s['reason']}\n")
    common.emit({"output": str(output), **s, "params": params}, as_json,
                f"{s['items']} labels over {s['topics']} topics ({s['topics_included']} included); "
                f"{s['ties']} ties resolved by {params['fallback']}; sources {s['labels_by_source']} -> {output}")


@app.command("agreement")
def agreement_cmd(
    judgments: List[Path] = typer.Argument(..., help="Judgments tables (qid, docid, assessor, grade)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the per-pair Cohen's kappa table."),
    threshold: Optional[int] = typer.Option(None, "--threshold", help="Also measure agreement on grades binarized at this level."),
    level: Optional[str] = typer.Option(None, "--level", help="Krippendorff level: nominal | ordinal | interval."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Inter-assessor agreement: Krippendorff's alpha, Fleiss' kappa, pairwise Cohen's kappa."""
    from qrelkit.labels import assessor_agreement  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[judgments, config], outputs=[output])
    cfg = common.config(config)
    lp = LabelsParams.from_config(cfg, vote_threshold=threshold, agreement_level=level)
    thr, lvl = lp.vote_threshold, lp.agreement_level
    summary, pairs = assessor_agreement(_read_judgments(judgments), threshold=thr, scale=lp.scale, level=lvl)
    _frame_out(pairs, output, "agreement-pairs", {"judgments": [str(f) for f in judgments], "threshold": thr,
                                                  "level": lvl})
    if as_json:
        common.emit(summary, True)
        return
    common.print_table(_kv(summary), title="Agreement")
    if len(pairs):
        common.print_table(pairs, title="Assessor pairs")


@app.command("binarize")
def binarize_cmd(
    qrels: Path = QrelsArg,
    output: Path = typer.Option(..., "-o", "--output", help="Binary qrels (TREC text or a table by extension)."),
    scheme: str = typer.Option("passage", "--scheme", help="passage | document | a name in [labels.schemes] | '2,3' | '>=2'."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Binary qrels: the scheme's grades -> 1, other judged grades -> 0 (negative grades kept)."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.labels import binarize, scheme_grades  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[qrels, config], outputs=[output])
    cfg = common.config(config)
    grades = scheme_grades(scheme, LabelsParams.from_config(cfg))
    q = read_qrels(qrels)
    out = binarize(q, grades)
    write_qrels_any(out, output, kind="qrels", params={"qrels": str(qrels), "scheme": scheme, "relevant": grades})
    n_rel = int(pa.compute.sum(pa.compute.equal(out["rel"], 1)).as_py() or 0)
    common.emit({"output": str(output), "scheme": scheme, "relevant_grades": grades, "judgments": out.num_rows,
                 "relevant": n_rel}, as_json, f"{n_rel} of {out.num_rows} judgments relevant under {scheme} {grades} -> {output}")


@app.command("expand")
def expand(
    qrels: Path = QrelsArg,
    classes: Path = typer.Option(..., "--classes", help="Near-duplicate classes (docid -> class id)."),
    output: Path = typer.Option(..., "-o", "--output", help="Expanded qrels (TREC text or a table by extension)."),
    report_out: Optional[Path] = typer.Option(None, "--report-out", help="Per-topic expansion table (Table 4 of TREC 2022)."),
    conflicts_out: Optional[Path] = typer.Option(None, "--conflicts-out", help="Classes whose judged members disagree."),
    scheme: str = typer.Option("passage", "--scheme", help="Scheme whose grades the report counts as relevant."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Expanded qrels: every near-duplicate of a judged passage gets its class's label."""
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.labels import expand_qrels, scheme_grades, threshold_of  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[qrels, classes, config], outputs=[output, report_out, conflicts_out])
    cfg = common.config(config)
    lp = LabelsParams.from_config(cfg)
    rel_at = threshold_of(scheme_grades(scheme, lp), lp.scale)
    exp = expand_qrels(read_qrels(qrels), read_classes(classes), relevant_at=rel_at)
    params = {"qrels": str(qrels), "classes": str(classes), "scheme": scheme}
    write_qrels_any(exp.qrels, output, kind="qrels-expanded", params=params)
    _frame_out(exp.report, report_out, "expansion-report", params)
    _frame_out(exp.conflicts, conflicts_out, "expansion-conflicts", params)
    s = exp.summary()
    common.emit({"output": str(output), **s}, as_json,
                f"{s['judged']} judgments -> {s['expanded']} after expansion (+{s['added']}, {s['added_relevant']} "
                f"relevant) over {s['topics']} topics; {s['conflicts']} conflicting classes -> {output}")


@app.command("propagate")
def propagate(
    qrels: Path = QrelsArg,
    output: Path = typer.Option(..., "-o", "--output", help="Document qrels (TREC text or a table by extension)."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Corpus with a document field (pid -> docid)."),
    mapping: Optional[Path] = typer.Option(None, "--mapping", help="Mapping table with columns pid, docid (.csv/.tsv/.parquet)."),
    id_separator: Optional[str] = typer.Option(None, "--id-separator", help="Document id = passage id before this (e.g. '#')."),
    classes: Optional[Path] = typer.Option(None, "--classes", help="Near-duplicate classes: duplicates count with their label."),
    rule: Optional[str] = typer.Option(None, "--rule", help="Document label from its passages: max | min | median_high."),
    grade_map: Optional[str] = typer.Option(None, "--grade-map", help="Passage grade -> document grade first, e.g. '1=0'."),
    documents_out: Optional[Path] = typer.Option(None, "--documents-out", help="Per-document table (passages, grades, label)."),
    disagree_out: Optional[Path] = typer.Option(None, "--disagree-out", help="Documents whose passages disagree."),
    examples: int = typer.Option(5, "--examples", help="Disagreeing documents printed as examples."),
    force: bool = common.ForceOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Passage labels -> document labels (max over judged passages by default), with the
    documents whose passages disagree. When no passage maps to a document, the empty result
    replaces no existing output that holds rows ([empty-result]) unless --force."""
    from qrelkit.io.classes import map_to_classes, read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.labels import parse_grade_map, passage_document_map, propagate_to_documents  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[qrels, corpus, mapping, classes, config], outputs=[output, documents_out, disagree_out])
    cfg = common.config(config)
    q = read_qrels(qrels)
    cls = read_classes(classes) if classes else None
    passages = set(q["docid"].to_pylist())
    if cls is not None:
        judged_classes = set(map_to_classes(q["docid"], cls).to_pylist())
        passages |= {d for d, c in zip(cls["docid"].to_pylist(), cls["class_id"].to_pylist()) if c in judged_classes}
    with common.progress("mapping passages to documents", None):
        m = passage_document_map(corpus=corpus, mapping=mapping, id_separator=id_separator, passages=passages)
    lp = LabelsParams.from_config(cfg, document_rule=rule,
                                  grade_map=parse_grade_map(grade_map) if grade_map is not None else None)
    r, gm = lp.document_rule, parse_grade_map(lp.grade_map)
    res = propagate_to_documents(q, m, rule=r, grade_map=gm, classes=cls)
    common.refuse_empty_result([output, documents_out], res.empty_reason(), force=force)
    params = {"qrels": str(qrels), "corpus": str(corpus) if corpus else None, "mapping": str(mapping) if mapping else None,
              "id_separator": id_separator, "classes": str(classes) if classes else None, "rule": r,
              "grade_map": {str(k): v for k, v in (gm or {}).items()}, "config": cfg.source}
    write_qrels_any(res.qrels, output, kind="qrels-documents", params=params)
    _frame_out(res.documents, documents_out, "document-labels", params)
    dis = res.disagreements()
    _frame_out(dis, disagree_out, "document-disagreements", params)
    ex = dis.head(examples)[["qid", "docid", "grades", "label"]].to_dict(orient="records")
    s = res.summary
    if as_json:
        common.emit({"output": str(output), **s, "examples": ex}, True)
        return
    common.emit(s, False, f"{s['passages']} passage labels -> {s['documents']} documents by {r} "
                f"({s['passages_unmapped']} passages without a document); {s['documents_multi_passage']} documents with "
                f"several judged passages, {s['documents_disagree']} of them disagree -> {output}")
    if ex:
        common.print_table(dis.head(examples)[["qid", "docid", "passages", "grades", "label"]],
                           title=f"Documents whose passages disagree ({len(dis)}; first {len(ex)})")


@app.command("compare")
def compare(
    a: Path = typer.Argument(..., help="Labels A (qrels)."),
    b: Path = typer.Argument(..., help="Labels B (qrels)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the confusion table (grade_a, grade_b, count)."),
    scheme: Optional[str] = typer.Option(None, "--scheme", help="Also compare binary labels under this scheme (e.g. document)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Agreement between two label sets on the items both judged: confusion table, Cohen's
    kappa, Krippendorff's alpha (e.g. propagated document labels vs direct document judgments)."""
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.labels import compare_labels, scheme_grades  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[a, b, config], outputs=[output])
    cfg = common.config(config)
    grades = scheme_grades(scheme, LabelsParams.from_config(cfg)) if scheme else None
    summary, conf = compare_labels(read_qrels(a), read_qrels(b), relevant=grades)
    _frame_out(conf, output, "label-agreement", {"a": str(a), "b": str(b), "scheme": scheme})
    if as_json:
        common.emit({**summary, "confusion": conf.to_dict(orient="records")}, True)
        return
    common.print_table(_kv(summary), title="Agreement")
    if len(conf):
        common.print_table(conf.pivot(index="grade_a", columns="grade_b", values="count").fillna(0).astype(int)
                           .reset_index(), title="Confusion (rows: A, columns: B)")
