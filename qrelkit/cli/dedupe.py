"""``qrelkit dedupe``: near-duplicate classes and their uses."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from qrelkit.cli import HELP, common
from qrelkit.cli.runs import RunsArg, load_runs
from qrelkit.dedupe.params import DedupeParams
from qrelkit.io.atomic import atomic_path
from qrelkit.labels.params import LabelsParams

if TYPE_CHECKING:  # names for annotations only: importing them loads pyarrow and pandas
    import pyarrow as pa

# Imports inside the commands (qrelkit.dedupe): it compiles numba kernels and 'dedupe cluster --dask'
# loads dask.distributed, too slow to pay on every 'qrelkit --help'. Everything else is imported here.
app = typer.Typer(help=HELP["dedupe"], no_args_is_help=True)


def _params(cfg, **flags):
    """``[dedupe]`` of the config with the command's flags (a flag given wins)."""
    return DedupeParams.from_config(cfg, **flags)


def _write_nist(lines: pa.Table, path: Path) -> None:
    """NIST's class file: ``class_id pid`` per line, no header (written atomically)."""
    import pyarrow.csv as pacsv  # lazy: pyarrow; `--help` stays fast
    with atomic_path(path) as tmp:
        pacsv.write_csv(lines, tmp, write_options=pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))


@app.command("cluster")
def cluster(
    corpus: Path = typer.Argument(..., help="Corpus: a file (.jsonl, .tsv, .parquet, optionally .gz), a folder of shards, or irds:DATASET (streamed)."),
    output: Path = typer.Option(..., "-o", "--output", help="Class table: .parquet (docid, class_id, class_size) or .tsv."),
    nist_out: Optional[Path] = typer.Option(None, "--nist-out", help="Also write NIST's format: 'class_id pid' per line."),
    index_out: Optional[Path] = typer.Option(None, "--index-out", help="Folder for signatures + classes (incremental mode)."),
    only_duplicates: bool = typer.Option(False, "--only-duplicates", help="Write only passages in classes of 2 or more."),
    ngram: Optional[int] = typer.Option(None, "--ngram", help=f"Words per shingle (default: {common.default_of('dedupe', 'ngram')})."),
    num_perm: Optional[int] = typer.Option(None, "--num-perm", help=f"MinHash permutations (default: {common.default_of('dedupe', 'num_perm')})."),
    bands: Optional[int] = typer.Option(None, "--bands", help=f"LSH bands (default: {common.default_of('dedupe', 'bands')})."),
    rows: Optional[int] = typer.Option(None, "--rows", help=f"Rows per band (default: {common.default_of('dedupe', 'rows')})."),
    threshold: Optional[float] = typer.Option(None, "--threshold", help=f"Jaccard a candidate pair must reach (default: {common.default_of('dedupe', 'threshold')})."),
    verify: Optional[str] = typer.Option(None, "--verify", help="exact (shingle sets, default) | signature (estimated Jaccard) | none."),
    mode: Optional[str] = typer.Option(None, "--mode", help="components (transitive) | greedy (NIST's first-claims)."),
    linkage: Optional[str] = typer.Option(None, "--linkage", help="canonical (members verified against the canonical) | single."),
    canonical: Optional[str] = typer.Option(None, "--canonical", help="first (corpus order) | priority (judged first)."),
    priority_qrels: Optional[Path] = typer.Option(None, "--priority-qrels", help="Qrels whose judged passages become canonical first."),
    keep_digits: Optional[bool] = typer.Option(None, "--keep-digits/--letters-only", help="Digits form words (default on; --letters-only as NIST)."),
    lower: Optional[bool] = typer.Option(None, "--lower/--no-lower", help="Lower-case (default on)."),
    strip_html: Optional[bool] = typer.Option(None, "--strip-html/--keep-html", help="Strip HTML tags of known elements (default on)."),
    dask: bool = typer.Option(False, "--dask", help="Run on dask.distributed (a LocalCluster unless --scheduler)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Address of a Dask scheduler (implies --dask)."),
    workers: int = typer.Option(2, "--workers", help="LocalCluster workers with --dask."),
    spill_dir: Optional[Path] = typer.Option(None, "--spill-dir", help="With --dask: shared folder for intermediate files."),
    bands_per_task: Optional[int] = typer.Option(None, "--bands-per-task", help="With --dask: bands keyed per task."),
    seed: Optional[int] = typer.Option(None, "--seed", help=f"MinHash seed (default: {common.default_of('dedupe', 'seed')})."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Cluster a corpus into near-duplicate classes with MinHash/LSH; prints the S-curve."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.qrels import judged, read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[corpus, priority_qrels, config], outputs=[output, nist_out], folders=[index_out, spill_dir])
    from qrelkit.dedupe.cluster import cluster_corpus, nist_lines  # lazy: qrelkit.dedupe loads numba
    cfg = common.config(config)
    params = _params(cfg, ngram=ngram, num_perm=num_perm, bands=bands, rows=rows, seed=seed, threshold=threshold,
                     verify=verify, mode=mode, linkage=linkage, canonical=canonical, lower=lower, strip_html=strip_html,
                     keep_digits=keep_digits)
    priority = None
    if priority_qrels is not None:
        priority = set(judged(read_qrels(priority_qrels))["docid"].to_pylist())
    if dask or scheduler:
        # lazy: dask.distributed takes seconds to import and only --dask needs it
        from qrelkit.dedupe.distributed import cluster_corpus_dask

        res = cluster_corpus_dask(corpus, params, priority=priority, scheduler=scheduler, n_workers=workers,
                                  spill_dir=spill_dir, bands_per_task=bands_per_task,
                                  return_signatures=index_out is not None)
    else:
        with common.progress("signing passages", None) as advance:
            res = cluster_corpus(corpus, params, priority=priority, progress=advance)
    table = res.classes
    if only_duplicates:
        table = table.filter(pa.compute.greater(table["class_size"], 1))
    write_table(table, output, kind="dedupe-classes", params=params.as_dict())
    if nist_out is not None:
        _write_nist(nist_lines(res.classes, only_duplicates=only_duplicates), nist_out)
    if index_out is not None and res.sig is not None:
        from qrelkit.dedupe.incremental import save_index  # lazy: qrelkit.dedupe loads numba

        save_index(res, res.sig, index_out)
    curve = params.s_curve()
    summary = {"output": str(output), **res.stats, "params": params.as_dict()}
    if as_json:
        common.emit(summary, True)
        return
    common.stderr.print("P(candidate) at Jaccard: " + "  ".join(f"{s:.2f}: {p:.3f}" for s, p in curve.items()))
    common.stderr.print(f"{res.stats['passages']} passages -> {res.stats['classes']} classes "
                        f"({res.stats['duplicate_classes']} with duplicates, largest {res.stats['largest_class']}) -> {output}")


@app.command("stats")
def stats(
    classes: Path = typer.Argument(..., help="Class table (.parquet/.tsv with docid, class_id) or a NIST file."),
    largest: int = typer.Option(10, "--largest", help="How many of the largest classes to show."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Show sample members' text from this corpus."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the size histogram (.csv/.tsv/.parquet)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Classes, size histogram, largest classes with sample members."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.corpus import lookup_texts  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[classes, corpus, config], outputs=[output])
    from qrelkit.dedupe.cluster import class_stats, read_nist  # lazy: qrelkit.dedupe loads numba

    common.config(config)
    st = class_stats(read_nist(classes), largest=largest)
    if corpus is not None:
        want = {p for c in st["largest"] for p in c["sample"]}
        texts = lookup_texts(corpus, want)
        for c in st["largest"]:
            c["texts"] = [texts.get(p, ("", None))[0][:200] for p in c["sample"]]
    if output is not None:
        hist = pa.table({"size": list(st["histogram"]), "classes": list(st["histogram"].values())})
        write_table(hist, output, kind="dedupe-histogram", params={"classes": str(classes)})
    if as_json:
        common.emit(st, True)
        return
    common.stdout.print(f"{st['passages']} passages in {st['classes']} classes; {st['duplicate_classes']} classes "
                        f"with duplicates hold {st['passages_in_duplicate_classes']} passages")
    common.print_table(pd.DataFrame(sorted(st["histogram"].items()), columns=["size", "classes"]), title="Class sizes")
    common.print_table(pd.DataFrame(st["largest"]).astype(str), title="Largest classes")


@app.command("import-nist")
def import_nist(
    nist: Path = typer.Argument(..., help="NIST near-duplicate file: 'class_id pid' per line (.gz allowed)."),
    output: Path = typer.Option(..., "-o", "--output", help="Class table (.parquet)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Import NIST's near-duplicate classes as a class table."""
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[nist, config], outputs=[output])
    from qrelkit.dedupe.cluster import class_stats, read_nist  # lazy: qrelkit.dedupe loads numba

    common.config(config)
    t = read_nist(nist)
    write_table(t, output, kind="dedupe-classes", params={"imported_from": str(nist)})
    st = class_stats(t, largest=0)
    common.emit({"output": str(output), **{k: v for k, v in st.items() if k not in ("histogram", "largest")}}, as_json,
                f"imported {st['passages']} passages in {st['classes']} classes -> {output}")


@app.command("assign")
def assign(
    corpus: Path = typer.Argument(..., help="Passages to add (any corpus format); known ones are skipped."),
    index: Path = typer.Option(..., "--index", help="Index folder written by 'dedupe cluster --index-out'."),
    output: Path = typer.Option(..., "-o", "--output", help="Class table of the new passages (.parquet/.tsv)."),
    update: bool = typer.Option(False, "--update", help="Also add them to the index's class table."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Incremental mode: assign new passages to existing classes from stored signatures."""
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[corpus, index, config], outputs=[output])
    from qrelkit.dedupe.incremental import assign_new, merge_index  # lazy: qrelkit.dedupe loads numba

    common.config(config)
    new, summary = assign_new(corpus, index)
    write_table(new, output, kind="dedupe-assigned", params={"index": str(index), **summary.get("params", {})})
    if update and new.num_rows:
        merged = merge_index(index, new)
        write_table(merged, index / "classes.parquet", kind="dedupe-classes", params=summary.get("params", {}))
    common.emit({"output": str(output), **{k: v for k, v in summary.items() if k != "params"}}, as_json,
                f"{summary['new_passages']} new passages: {summary['joined_existing']} joined existing classes, "
                f"{summary['new_classes']} new classes -> {output}")


@app.command("runs")
def runs_(
    runs: List[Path] = RunsArg,
    classes: Path = typer.Option(..., "--classes", help="Class table or NIST file."),
    output: Path = typer.Option(..., "-o", "--output", help="Deduplicated runs: .parquet or TREC text."),
    depth: Optional[int] = typer.Option(None, "--depth", "-k", help="Truncate each run to this depth first."),
    lenient: Optional[bool] = typer.Option(None, "--lenient/--strict", help="Repair run defects instead of failing."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Dedupe runs: map passages to class ids, keep the first hit per class, renumber ranks."""
    from qrelkit.io.classes import dedupe_runs, read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.runs import write_trec_run  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[runs, classes, config], outputs=[output])
    cfg = common.config(config)
    rs = load_runs(runs, cfg, lenient=lenient)
    d = dedupe_runs(rs.table, read_classes(classes), depth=depth)
    if output.suffix == ".parquet":
        write_table(d, output, kind="runs-deduped", params={"classes": str(classes), "depth": depth})
    else:
        write_trec_run(d.drop_columns(["docid"]).rename_columns(
            ["run", "qid", "rank", "score", "docid"]).select(["run", "qid", "docid", "rank", "score"]), output)
    summary = {"output": str(output), "lines_in": rs.table.num_rows, "lines_out": d.num_rows}
    common.report_repairs(rs.repairs(), summary)
    common.emit(summary, as_json,
                f"{rs.table.num_rows} -> {d.num_rows} lines after dedupe -> {output}")


@app.command("expand-qrels")
def expand(
    qrels: Path = typer.Argument(..., help="Qrels on canonical passages."),
    classes: Path = typer.Option(..., "--classes", help="Class table or NIST file."),
    output: Path = typer.Option(..., "-o", "--output", help="Expanded qrels: TREC text or .parquet."),
    table_out: Optional[Path] = typer.Option(None, "--table-out", help="Per-topic expansion table (as TREC 2022 Table 4)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Give every member of a judged class the class's label; report the expansion per topic."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.qrels import read_qrels, write_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[qrels, classes, config], outputs=[output, table_out])
    from qrelkit.dedupe.apply import expansion_table, label_class_members  # lazy: qrelkit.dedupe loads numba

    cfg = common.config(config)
    q = read_qrels(qrels)
    ex, conflicts = label_class_members(q, read_classes(classes))
    if output.suffix == ".parquet":
        write_table(ex, output, kind="qrels-expanded", params={"qrels": str(qrels), "classes": str(classes)})
    else:
        write_qrels(ex, output)
    tab = expansion_table(q, ex, labels=list(LabelsParams.from_config(cfg).scale))
    if table_out is not None:
        write_table(pa.Table.from_pandas(tab.astype({"qid": str}), preserve_index=False), table_out,
                    kind="qrels-expansion", params={"qrels": str(qrels), "classes": str(classes)})
    total = tab[tab["qid"] == "all"].iloc[0]
    summary = {"output": str(output), "judged": int(total["judged_total"]), "expanded": int(total["expanded_total"]),
               "conflicting_classes": len(conflicts)}
    if as_json:
        common.emit(summary, True)
        return
    common.print_table(tab, title="Expansion per topic (judged vs expanded, per label)")
    common.stderr.print(f"{summary['judged']} judged -> {summary['expanded']} expanded qrels; "
                        f"{len(conflicts)} classes with disagreeing judged members -> {output}")


@app.command("evaluate")
def evaluate(
    classes: Path = typer.Argument(..., help="Class table to judge."),
    truth: Path = typer.Option(..., "--truth", help="Ground-truth classes (NIST format or class table)."),
    corpus: Path = typer.Option(..., "--corpus", help="Corpus, for the word-edit distance of each true copy."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write recall by number of edits (.csv/.tsv/.parquet)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Pair precision/recall against ground truth, and copy recall by number of word edits."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[classes, truth, corpus, config], outputs=[output])
    from qrelkit.dedupe.accuracy import evaluate_classes  # lazy: qrelkit.dedupe loads numba

    common.config(config)
    scores, by_edits = evaluate_classes(read_classes(classes), read_classes(truth), corpus)
    if output is not None:
        write_table(pa.Table.from_pandas(by_edits, preserve_index=False), output, kind="dedupe-evaluation",
                    params={"classes": str(classes), "truth": str(truth)})
    if as_json:
        common.emit({**scores, "by_edits": by_edits.to_dict(orient="records")}, True)
        return
    common.stdout.print(f"pair precision {scores['precision']:.4f}, pair recall {scores['recall']:.4f} "
                        f"({scores['true_positive_pairs']} of {scores['true_pairs']} true pairs)")
    common.print_table(by_edits, title="Copies found in their source's class, by word edits")
