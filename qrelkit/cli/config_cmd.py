"""``qrelkit config``: the effective configuration and where each value came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from qrelkit.cli import HELP, common
from qrelkit.config import load_config

app = typer.Typer(help=HELP["config"], no_args_is_help=True)


def _shown(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, default=str)


@app.command("show")
def show(
    config: Optional[Path] = common.ConfigOpt,
    settings: List[str] = typer.Option([], "--set", help="Override SECTION.KEY=VALUE (TOML value; repeatable), e.g. pool.depth=20."),
    as_json: bool = common.JsonOpt,
) -> None:
    """Print every configuration key with its effective value and origin: default (the schema's),
    file (FILE:LINE of --config) or flag (--set). Unknown keys and bad values fail as in every command."""
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    cfg = load_config(config, settings)
    rows = cfg.effective()
    if as_json:
        common.emit({"config": cfg.source, "values": rows}, True)
        return
    df = pd.DataFrame([{"section": r["section"], "key": r["key"], "value": _shown(r["value"]),
                        "origin": r["origin"] + (f" ({r['where']})" if r["where"] else "")} for r in rows])
    common.print_table(df, title=f"effective configuration ({cfg.source or 'defaults'})")
