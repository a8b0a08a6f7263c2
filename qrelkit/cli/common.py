"""What every command shares: options, progress on stderr, the one-line error contract, and
``--json`` summaries on stdout."""

from __future__ import annotations

import contextlib
import json
import sys
import tomllib
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional

import typer
from rich.console import Console

from qrelkit.cli.help import EXAMPLES, examples, reflow  # noqa: F401 - every command module takes them from here
from qrelkit.config import Config, check_value, default as declared_default, load_config, schema
from qrelkit.errors import InputError
from qrelkit.io.paths import check_io, refuse_empty_result  # noqa: F401 - every command calls check_io first, with its paths;
# refuse_empty_result before it writes a result that may be empty

# no rich markup in what qrelkit prints: ids, rules ('[rule]') and config sections ('[pool]') are text
stderr = Console(stderr=True, soft_wrap=True, markup=False)
stdout = Console(markup=False) if Console().is_terminal else Console(width=200, markup=False)

def shown(value: Any) -> str:
    """A default as a flag's help shows it: ``none``, ``true``/``false``, a comma list, a number
    (thousands grouped from 10,000) or the word itself.

    >>> shown(None), shown(True), shown([2, 3]), shown(1000000), shown(0.4), shown("RR@10")
    ('none', 'true', '2,3', '1,000,000', '0.4', 'RR@10')
    """
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(shown(v) for v in value)
    if isinstance(value, int) and abs(value) >= 10000:
        return f"{value:,}"
    return str(value)


def default_of(section: str, key: str) -> str:
    """``config [section] key, VALUE``: where a flag's default comes from and the declared value
    (for a help text: the default is written once, in the declaration).

    >>> default_of("pool", "depth")
    'config [pool] depth, 10'
    """
    return f"config [{section}] {key}, {shown(declared_default(section, key))}"


ConfigOpt = typer.Option(None, "--config", "-c", help="Protocol file (TOML); flags override it.", exists=False)
JsonOpt = typer.Option(False, "--json", help="Print a machine-readable JSON summary on stdout.")
SeedOpt = typer.Option(None, "--seed", help="Random seed (default: the config's, else 0).")
ForceOpt = typer.Option(False, "--force", help="Write an empty result even over an existing output that holds rows.")


def config(path: Optional[Path]) -> Config:
    return load_config(path)


def dask_choice(workers: Optional[int], scheduler: Optional[str]) -> dict[str, Any]:
    """``--workers N`` (a Dask LocalCluster) or ``--scheduler ADDR`` (a running one) as the
    library takes them (``{}``: neither); both at once are refused."""
    if workers is not None and scheduler is not None:
        raise InputError("bad-option", "give --workers (a LocalCluster) or --scheduler (a running cluster), not both")
    if workers is not None and workers < 1:
        raise InputError("bad-option", "--workers must be at least 1")
    return {"workers": workers} if workers is not None else {"scheduler": scheduler} if scheduler is not None else {}


def key_values(items: list[str], section: str | None = None) -> dict[str, Any]:
    """``--set KEY=VALUE`` items (the value in TOML syntax, else the bare text) as a dict: a rule's
    or a pool kind's parameters. A key the configuration declares in ``[section]`` is checked as
    the file's would be."""
    known = schema().get(section, {}) if section else {}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError("bad-option", f"--set needs KEY=VALUE, got {item!r}")
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()
        out[key] = check_value(section, key, value, file="--set") if key in known else value
    return out


@contextlib.contextmanager
def progress(description: str, total: int | None = None) -> Iterator:
    """A rich progress bar on stderr (only when stderr is a terminal). Yields ``advance(n=1,
    total=None)``, the progress callback library functions take: ``n`` units done; a library
    function that knows the total only once it has started announces it as ``total``."""
    if not stderr.is_terminal:
        yield lambda n=1, total=None: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # lazy: a terminal's bar only

    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=stderr, transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)

        def advance(n: int = 1, total: int | None = None) -> None:
            if total is not None:
                bar.update(task, total=total)
            bar.advance(task, n)

        yield advance


def emit(summary: dict[str, Any], as_json: bool, human: str | None = None) -> None:
    """Report: JSON on stdout with ``--json``, else a human line on stderr."""
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")
    elif human:
        stderr.print(human)


def report_repairs(counts: Mapping[str, int], summary: dict[str, Any] | None = None) -> dict[str, int]:
    """Say what ``--lenient`` repaired: counts per rule (from the library's report) on one stderr
    line when anything was, and as ``summary["repaired"]`` (``{rule: count}``) for ``--json``."""
    rep = {str(r): int(n) for r, n in sorted(counts.items()) if int(n)}
    if rep:
        stderr.print("repaired (--lenient): " + ", ".join(f"{r} {n}" for r, n in rep.items()),
                     markup=False, highlight=False)
    if summary is not None:
        summary["repaired"] = rep
    return rep


def print_table(df, title: str | None = None, console: Console | None = None) -> None:
    from rich.table import Table  # lazy: only a command that prints a table needs it

    t = Table(title=title, show_lines=False)
    for c in df.columns:
        t.add_column(str(c), justify="right" if str(df[c].dtype).startswith(("int", "float", "Int")) else "left")
    for row in df.itertuples(index=False):
        t.add_row(*["" if v is None else str(v) for v in row])
    (console or stdout).print(t)


def records(df) -> list[dict]:
    """A data frame as JSON-ready records, missing values (NaN, NA) as None (``null``)."""
    return df.astype(object).where(df.notna(), None).to_dict(orient="records")
