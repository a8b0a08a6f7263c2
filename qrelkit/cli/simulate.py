"""``qrelkit simulate``: synthetic campaigns for demos, tests and benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from qrelkit.cli import HELP, common
from qrelkit.errors import InputError
from qrelkit.labels.params import LabelsParams

app = typer.Typer(help=HELP["simulate"], no_args_is_help=True)
#: the simulators' seed: a flag, 0 when not given (they read no seed from a configuration)
SeedOpt = typer.Option(None, "--seed", help="Random seed, at least 0 (default: 0).")


def _seed(seed: Optional[int]) -> int:
    """The seed given (0 without one); a negative one is ``[bad-option]``, before any work."""
    if seed is not None and seed < 0:
        raise InputError("bad-option", f"--seed must be at least 0, got {seed}")
    return seed or 0


@app.command("campaign")
def campaign(
    output: Path = typer.Option(..., "-o", "--output", help="Folder to write the campaign into."),
    passages: int = typer.Option(20000, "--passages", help="Passages in the corpus."),
    topics: int = typer.Option(20, "--topics", help="Topics."),
    groups: int = typer.Option(6, "--groups", help="Participating groups."),
    depth: int = typer.Option(100, "--depth", help="Run depth per topic."),
    dup_fraction: float = typer.Option(0.1, "--dup-fraction", help="Share of passages that are near-duplicates."),
    msmarco_v2: bool = typer.Option(False, "--msmarco-v2", help="The corpus as MS MARCO v2 ships it: a folder of "
                                    "gzip JSONL shards, pids msmarco_passage_NN_<byte offset>, docids msmarco_doc_NN_..."),
    shards: int = typer.Option(10, "--shards", help="With --msmarco-v2: files of the corpus."),
    seed: Optional[int] = SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Corpus with documents and near-duplicates, topics, hidden graded qrels, runs and manifest."""
    from qrelkit.simulate.campaign import simulate_campaign  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[config], folders=[output])
    common.config(config)
    with common.progress("simulating campaign", 1.0) as advance:
        last = [0.0]

        def report(step: str, fraction: float) -> None:
            advance(max(fraction - last[0], 0.0))
            last[0] = max(fraction, last[0])

        summary = simulate_campaign(output, n_passages=passages, n_topics=topics, n_groups=groups, depth=depth,
                                    dup_fraction=dup_fraction, seed=_seed(seed), progress=report,
                                    layout="msmarco-v2" if msmarco_v2 else "flat", shards=shards)
    common.emit(summary, as_json, f"campaign written to {output}")


@app.command("collection")
def collection(
    output: Path = typer.Option(..., "-o", "--output", help="Folder to write runs/, qrels.txt and manifest.csv into."),
    topics: int = typer.Option(50, "--topics", help="Topics (qids 401 upwards)."),
    runs: int = typer.Option(71, "--runs", help="Runs."),
    groups: int = typer.Option(40, "--groups", help="Groups that submitted them (one run each at least)."),
    depth: int = typer.Option(100, "--depth", help="Pool depth: the qrels judge the pooled runs' top DEPTH."),
    run_length: int = typer.Option(1000, "--run-length", help="Documents per topic in every run."),
    pooled: Optional[int] = typer.Option(None, "--pooled", help="Runs pooled, by priority (default: all)."),
    seed: Optional[int] = SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """A TREC-8-shaped ad hoc collection without text: runs of varied quality, the judged depth pool
    (binary qrels) and the manifest (docs/data-model.md, "Synthetic collections")."""
    from qrelkit.simulate.collection import simulate_collection, write_collection  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[config], folders=[output])
    common.config(config)
    c = simulate_collection(topics=topics, runs=runs, groups=groups, depth=depth, run_length=run_length,
                            pooled=pooled, seed=_seed(seed))
    summary = write_collection(c, output)
    p, r = summary["pool_per_topic"], summary["relevant_per_topic"]
    common.emit(summary, as_json, f"collection written to {output}: {summary['runs']} runs, {summary['topics']} topics, "
                f"{p['mean']:,.0f} pool documents and {r['mean']:,.1f} relevant per topic")


@app.command("judge")
def judge(
    batches: Path = typer.Argument(..., help="A batch table from 'batch make'."),
    qrels: Path = typer.Option(..., "--qrels", "-q", help="Hidden truth (qrels) the simulated assessor follows."),
    output: Path = typer.Option(..., "-o", "--output", help="Completed batch table (.csv/.jsonl/.parquet)."),
    unjudged: str = typer.Option("zero", "--unjudged", help="Grade of passages missing from the qrels: zero | skip."),
    error_rate: float = typer.Option(0.0, "--error-rate", help="Probability of a wrong grade."),
    seed: Optional[int] = SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Fill in a batch as a simulated assessor would, from hidden qrels."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_table, write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.simulate.oracle import judge_batches  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[batches, qrels, config], outputs=[output])
    cfg = common.config(config)
    done = judge_batches(read_table(batches).to_pandas(), read_qrels(qrels), unjudged=unjudged, error_rate=error_rate,
                         scale=tuple(LabelsParams.from_config(cfg).scale), seed=_seed(seed))
    write_table(pa.Table.from_pandas(done, preserve_index=False), output, kind="batches-completed",
                params={"batches": str(batches), "qrels": str(qrels), "unjudged": unjudged, "error_rate": error_rate,
                        "seed": _seed(seed)})
    graded = int(done["grade"].notna().sum())
    common.emit({"output": str(output), "rows": len(done), "graded": graded}, as_json,
                f"graded {graded} of {len(done)} rows -> {output}")
