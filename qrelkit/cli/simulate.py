"""``qrelkit simulate``: synthetic campaigns for demos, tests and benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from qrelkit.cli import common

app = typer.Typer(help="Generate synthetic judging campaigns.", no_args_is_help=True)


@app.command("campaign")
def campaign(
    output: Path = typer.Option(..., "-o", "--output", help="Folder to write the campaign into."),
    passages: int = typer.Option(20000, "--passages", help="Passages in the corpus."),
    topics: int = typer.Option(20, "--topics", help="Topics."),
    groups: int = typer.Option(6, "--groups", help="Participating groups."),
    depth: int = typer.Option(100, "--depth", help="Run depth per topic."),
    dup_fraction: float = typer.Option(0.1, "--dup-fraction", help="Share of passages that are near-duplicates."),
    seed: Optional[int] = common.SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Corpus with documents and near-duplicates, topics, hidden graded qrels, runs and manifest."""
    from qrelkit.simulate.campaign import simulate_campaign

    common.config(config)
    with common.progress("simulating campaign", 1.0) as advance:
        last = [0.0]

        def report(step: str, fraction: float) -> None:
            advance(max(fraction - last[0], 0.0))
            last[0] = max(fraction, last[0])

        summary = simulate_campaign(output, n_passages=passages, n_topics=topics, n_groups=groups, depth=depth,
                                    dup_fraction=dup_fraction, seed=seed or 0, progress=report)
    common.emit(summary, as_json, f"campaign written to {output}")
