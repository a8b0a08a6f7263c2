"""``qrelkit pool``: select pooled runs, build pools, describe them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from qrelkit.cli import HELP, common
from qrelkit.cli.runs import RunsArg, load_runs
from qrelkit.pooler import FractionalParams, PoolParams

if TYPE_CHECKING:  # names for annotations only: importing them loads pyarrow and pandas
    import pyarrow as pa

app = typer.Typer(help=HELP["pool"], no_args_is_help=True)

ManifestOpt = typer.Option(None, "--manifest", "-m", help="Manifest: pool only the selected runs (see 'pool select').")
AllRunsOpt = typer.Option(False, "--all-runs", help="Pool every run even when a manifest is given.")
ClassesOpt = typer.Option(None, "--classes", help="Near-duplicate classes (docid -> class id): pool class ids.")
QrelsOpt = typer.Option(None, "--qrels", "-q", help="Qrels: mark or drop what is already judged.")
JudgedOpt = typer.Option(None, "--judged", help="keep | mark | drop already judged items (default: config).")
OutputOpt = typer.Option(..., "-o", "--output", help="Output table: .parquet (with parameters), .tsv, .csv, .jsonl.")
LenientOpt = typer.Option(None, "--lenient/--strict", help="Repair run defects instead of failing.")


TiesOpt = typer.Option(None, "--ties", help="Order of equal scores within a topic: docid-desc (trec_eval) | docid-asc | file-order (default: config [pool] ties).")


def _inputs(runs, config, ties, manifest, all_runs, lenient, classes, qrels):
    """The config, the tie rule (flag, else config), the runs (restricted to the pooled ones when a
    manifest is given), their names, classes, qrels and the run set."""
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.manifest import read_manifest  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.pooler import filter_runs  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.pooler.protocol import configured_selection  # lazy: pyarrow, pandas; `--help` stays fast
    cfg = common.config(config)
    tie = PoolParams.from_config(cfg, ties=ties).ties
    man = read_manifest(manifest) if manifest else None
    rs = load_runs(runs, cfg, manifest=manifest, lenient=lenient, ties=tie)
    table = rs.table
    pooled = rs.runs
    if man is not None and not all_runs:
        sel = configured_selection(man, cfg)
        pooled = sorted(set(sel.loc[sel["pooled"], "run"]) & set(rs.runs))
        table = filter_runs(table, pooled)
    cls = read_classes(classes) if classes else None
    q = read_qrels(qrels) if qrels else None
    return cfg, tie, table, pooled, cls, q, rs


def _params(**kw) -> dict:
    return {k: (str(v) if isinstance(v, Path) else [str(x) for x in v] if isinstance(v, list) else v) for k, v in kw.items()}


def _report(pool: pa.Table, output: Path, pooled: list[str], as_json: bool, extra: dict | None = None,
            rs=None) -> None:
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.pooler import pool_size_distribution  # lazy: pyarrow, pandas; `--help` stays fast
    dist = pool_size_distribution(pool)
    summary = {"output": str(output), "runs_pooled": len(pooled), "items": pool.num_rows, "topics": dist["topics"],
               "size_mean": dist["mean"], "size_median": dist["median"], "size_min": dist["min"], "size_max": dist["max"]}
    if "judged" in pool.column_names:
        summary["already_judged"] = int(pa.compute.sum(pool["judged"]).as_py() or 0)
    summary.update(extra or {})
    if rs is not None:
        common.report_repairs(rs.repairs(), summary)
    common.emit(summary, as_json, f"pooled {pool.num_rows} items over {dist['topics']} topics from {len(pooled)} runs "
                f"(mean {dist['mean']:.2f} per topic) -> {output}")


@app.command("select")
def select(
    manifest: Path = typer.Option(..., "--manifest", "-m", help="Manifest (CSV/TOML)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the selection table."),
    per_group: Optional[int] = typer.Option(None, "--per-group", help="Highest-priority runs per group and subtask."),
    baselines: Optional[bool] = typer.Option(None, "--baselines/--no-baselines", help="Pool all baselines."),
    include: List[str] = typer.Option([], "--include", help="Always pool this run (repeatable)."),
    exclude: List[str] = typer.Option([], "--exclude", help="Never pool this run (repeatable)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Choose the runs that feed the pool: baselines + N highest-priority runs per group and subtask."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.manifest import read_manifest  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.pooler.protocol import configured_selection  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[manifest, config], outputs=[output])
    cfg = common.config(config)
    sel = configured_selection(read_manifest(manifest), cfg, select=True, per_group=per_group,
                               include_baselines=baselines, include=include, exclude=exclude)
    if output:
        write_table(pa.Table.from_pandas(sel, preserve_index=False), output, kind="pool-selection",
                    params=_params(manifest=manifest, per_group=per_group, include=include, exclude=exclude))
    if as_json:
        common.emit({"pooled": int(sel["pooled"].sum()), "runs": len(sel),
                     "selection": sel[["run", "group", "subtask", "priority", "baseline", "pooled", "reason"]].to_dict(orient="records")}, True)
    else:
        common.print_table(sel[["run", "group", "subtask", "priority", "baseline", "pooled", "reason"]],
                           title=f"{int(sel['pooled'].sum())} of {len(sel)} runs pooled")


@app.command("make")
@common.examples("qrelkit pool make runs/ --kind depth --set depth=20 -o pool.parquet",
                 "qrelkit pool make runs/ -c protocol.toml -m manifest.csv -o pool.parquet")
def make(
    runs: List[Path] = RunsArg,
    output: Path = OutputOpt,
    kind: Optional[str] = typer.Option(None, "--kind", help=f"Pool kind: depth | top1 | fused | rrf | rbp | fractional, or a registered one (default: {common.default_of('pool', 'kind')})."),
    settings: List[str] = typer.Option([], "--set", help="A parameter of the kind KEY=VALUE (repeatable; default: the config's), e.g. depth=20, take=50, method=rbp."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="The passage corpus (kind fractional: its kept passages are drawn from it)."),
    manifest: Optional[Path] = ManifestOpt,
    all_runs: bool = AllRunsOpt,
    classes: Optional[Path] = ClassesOpt,
    qrels: Optional[Path] = QrelsOpt,
    lenient: Optional[bool] = LenientOpt,
    ties: Optional[str] = TiesOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """The pool of any registered kind, its parameters from the config as the kind reads them
    (depth: [pool] depth and judged; top1: [top1]; fused, rrf, rbp: [fused]; fractional:
    [fractional] and [pool] depth; a plugin's: [pool.<kind>]), --set overriding; 'pool depth',
    'pool top1', 'pool fused' and 'pool fractional' are this command for one kind."""
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.pooler import configured_pool  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[runs, corpus, manifest, classes, qrels, config], outputs=[output])
    cfg, tie, table, pooled, cls, q, rs = _inputs(runs, config, ties, manifest, all_runs, lenient, classes, qrels)
    made = configured_pool(kind, table, cfg, classes=cls, qrels=q, corpus=corpus, **common.key_values(settings))
    write_table(made.table, output, kind=f"pool-{made.kind}", params=_params(
        runs=runs, pooled_runs=pooled, kind=made.kind, **made.params, classes=classes, qrels=qrels, corpus=corpus,
        ties=tie, config=cfg.source))
    _report(made.table, output, pooled, as_json, {"kind": made.kind, **made.params, "ties": tie}, rs)


@app.command("depth")
def depth(
    runs: List[Path] = RunsArg,
    output: Path = OutputOpt,
    depth_: Optional[int] = typer.Option(None, "--depth", "-k", help=f"Pool depth (default: {common.default_of('pool', 'depth')})."),
    run_depth: Optional[Path] = typer.Option(None, "--run-depth", help="CSV run,depth: per-run depths."),
    manifest: Optional[Path] = ManifestOpt,
    all_runs: bool = AllRunsOpt,
    classes: Optional[Path] = ClassesOpt,
    qrels: Optional[Path] = QrelsOpt,
    judged: Optional[str] = JudgedOpt,
    lenient: Optional[bool] = LenientOpt,
    ties: Optional[str] = TiesOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Depth-k pool with provenance, in assessor order (min rank, more runs, docid)."""
    from qrelkit.io.manifest import read_run_depths  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.pooler import configured_pool  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[runs, run_depth, manifest, classes, qrels, config], outputs=[output])
    cfg, tie, table, pooled, cls, q, rs = _inputs(runs, config, ties, manifest, all_runs, lenient, classes, qrels)
    per_run = read_run_depths(run_depth) if run_depth else None
    made = configured_pool("depth", table, cfg, depth=depth_, per_run_depth=per_run, judged=judged, classes=cls,
                           qrels=q)
    k, pol = made.params["depth"], made.params["judged"]
    write_table(made.table, output, kind="pool-depth", params=_params(
        runs=runs, pooled_runs=pooled, depth=k, per_run_depth=per_run or {}, classes=classes, qrels=qrels,
        judged=pol, ties=tie, config=cfg.source))
    _report(made.table, output, pooled, as_json, {"depth": k, "ties": tie}, rs)


@app.command("top1")
def top1(
    runs: List[Path] = RunsArg,
    output: Path = OutputOpt,
    qrels: Optional[Path] = typer.Option(None, "--qrels", "-q", help="Add each topic's known relevant passages (the perfect run)."),
    perfect_min_rel: Optional[int] = typer.Option(None, "--perfect-min-rel", help="Grade a qrel needs to join."),
    perfect: Optional[str] = typer.Option(None, "--perfect", help="all qrels >= min grade, or only the best-graded: all | best."),
    manifest: Optional[Path] = ManifestOpt,
    all_runs: bool = AllRunsOpt,
    classes: Optional[Path] = ClassesOpt,
    lenient: Optional[bool] = LenientOpt,
    ties: Optional[str] = TiesOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Shallow top-1 pool (+ the perfect run) and its pool-size distribution."""
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.pooler import configured_pool, pool_size_distribution  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[runs, qrels, manifest, classes, config], outputs=[output])
    cfg, tie, table, pooled, cls, q, rs = _inputs(runs, config, ties, manifest, all_runs, lenient, classes, qrels)
    made = configured_pool("top1", table, cfg, perfect_min_rel=perfect_min_rel, perfect=perfect, classes=cls, qrels=q)
    pool = made.table
    write_table(pool, output, kind="pool-top1", params=_params(runs=runs, pooled_runs=pooled, qrels=qrels,
                **made.params, classes=classes, ties=tie, config=cfg.source))
    dist = pool_size_distribution(pool)
    _report(pool, output, pooled, as_json, {"histogram": dist["histogram"], "ties": tie}, rs)


@app.command("fused")
def fused(
    runs: List[Path] = RunsArg,
    output: Path = OutputOpt,
    take: Optional[int] = typer.Option(None, "--take", "-n", help="Items per topic."),
    method: Optional[str] = typer.Option(None, "--method", help="rrf or rbp."),
    rrf_k: Optional[float] = typer.Option(None, "--rrf-k"),
    rbp_p: Optional[float] = typer.Option(None, "--rbp-p"),
    manifest: Optional[Path] = ManifestOpt,
    all_runs: bool = AllRunsOpt,
    classes: Optional[Path] = ClassesOpt,
    qrels: Optional[Path] = QrelsOpt,
    judged: Optional[str] = JudgedOpt,
    lenient: Optional[bool] = LenientOpt,
    ties: Optional[str] = TiesOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Take-N pool by rank fusion (RRF or RBP weights) of the pooled runs."""
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.pooler import configured_pool  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[runs, manifest, classes, qrels, config], outputs=[output])
    cfg, tie, table, pooled, cls, q, rs = _inputs(runs, config, ties, manifest, all_runs, lenient, classes, qrels)
    made = configured_pool("fused", table, cfg, take=take, method=method, rrf_k=rrf_k, rbp_p=rbp_p, judged=judged,
                           classes=cls, qrels=q)
    p = made.params
    write_table(made.table, output, kind="pool-fused", params=_params(runs=runs, pooled_runs=pooled, method=p["method"],
                take=p["take"], rrf_k=p["k"], rbp_p=p["p"], classes=classes, qrels=qrels, judged=p["judged"], ties=tie,
                config=cfg.source))
    _report(made.table, output, pooled, as_json, {"method": p["method"], "take": p["take"], "ties": tie}, rs)


@app.command("fractional")
def fractional(
    runs: List[Path] = RunsArg,
    corpus: Path = typer.Option(..., "--corpus", help="The passage corpus (streamed)."),
    output: Path = OutputOpt,
    fraction: Optional[float] = typer.Option(None, "--fraction", help="Share of the deduplicated corpus kept."),
    seed: Optional[int] = common.SeedOpt,
    depth_: Optional[int] = typer.Option(None, "--depth", "-k"),
    ids_out: Optional[Path] = typer.Option(None, "--ids-out", help="Also write the kept passage ids (.parquet/.tsv)."),
    runs_out: Optional[Path] = typer.Option(None, "--runs-out", help="Also write the restricted runs (.parquet or TREC text)."),
    manifest: Optional[Path] = ManifestOpt,
    all_runs: bool = AllRunsOpt,
    classes: Optional[Path] = ClassesOpt,
    qrels: Optional[Path] = QrelsOpt,
    lenient: Optional[bool] = LenientOpt,
    ties: Optional[str] = TiesOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Fractional collection: a seeded random fraction of the corpus, the restricted runs, and
    their depth-k pool minus what is already judged."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.runs import write_trec_run  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.pooler import configured_pool, fractional_ids_from_corpus, restrict_runs  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[runs, corpus, manifest, classes, qrels, config], outputs=[output, ids_out, runs_out])
    cfg, tie, table, pooled, cls, q, rs = _inputs(runs, config, ties, manifest, all_runs, lenient, classes, qrels)
    fp = FractionalParams.from_config(cfg, fraction=fraction, seed=seed)
    f, s = fp.fraction, fp.seed
    with common.progress("sampling corpus", None):
        kept = fractional_ids_from_corpus(corpus, f, s, classes=cls)
    made = configured_pool("fractional", table, cfg, kept=kept, depth=depth_, fraction=f, seed=s, classes=cls, qrels=q)
    pool, k = made.table, made.params["depth"]
    restricted = restrict_runs(table, kept, classes=cls)
    params = _params(runs=runs, pooled_runs=pooled, corpus=corpus, fraction=f, seed=s, depth=k, classes=classes,
                     qrels=qrels, ties=tie, config=cfg.source)
    if ids_out:
        write_table(pa.table({"pid": kept}), ids_out, kind="fractional-ids", params=params)
    if runs_out:
        if runs_out.suffix == ".parquet":
            write_table(restricted, runs_out, kind="runs-restricted", params=params)
        else:
            write_trec_run(restricted, runs_out)
    write_table(pool, output, kind="pool-fractional", params=params)
    _report(pool, output, pooled, as_json, {"fraction": f, "seed": s, "kept_passages": len(kept),
                                            "restricted_documents": restricted.num_rows, "ties": tie}, rs)


@app.command("stats")
def stats(
    pool: Path = typer.Argument(..., help="A pool written by a pool command (.parquet)."),
    manifest: Optional[Path] = typer.Option(None, "--manifest", "-m", help="Map runs to groups."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Folder for the tables (CSV)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Pool size per topic, unique contributions per run and group, overlap between runs."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.manifest import read_manifest  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.pooler import pool_size_distribution, pool_stats  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.pooler.saved import read_pool  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[pool, manifest, config], folders=[output])
    common.config(config)
    t, _ = read_pool(pool)
    res = pool_stats(t, read_manifest(manifest) if manifest else None)
    if output:
        for name, df in res.items():
            write_table(pa.Table.from_pandas(df, preserve_index=False), output / f"{name}.csv", kind=f"pool-stats-{name}",
                        params={"pool": str(pool)})
    dist = pool_size_distribution(t)
    if as_json:
        common.emit({"size": {k: v for k, v in dist.items() if k != "sizes"},
                     **{k: v.to_dict(orient="records") for k, v in res.items() if k != "overlap"}}, True)
        return
    common.stdout.print(f"{dist['total']} items over {dist['topics']} topics: mean {dist['mean']:.2f}, "
                        f"median {dist['median']:.1f}, min {dist['min']}, max {dist['max']}")
    common.print_table(res["groups"], title="Contributions per group")
    common.print_table(res["runs"], title="Contributions per run")
