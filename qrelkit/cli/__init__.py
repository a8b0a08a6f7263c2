"""The ``qrelkit`` command line: thin Typer commands over the library.

Bad input never crashes: an :class:`~qrelkit.errors.InputError` becomes one line on stderr
(``qrelkit: error: FILE:LINE: [rule] message``) and exit code 2, with no output written.
"""

from __future__ import annotations

import sys

import typer

from qrelkit.errors import InputError

app = typer.Typer(
    name="qrelkit",
    help="Build TREC-style test collections: validate runs, build judgment pools, make assessor batches, aggregate and propagate labels, evaluate runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    from qrelkit.cli import batch, cal, dedupe, pool, runs, simulate

    app.add_typer(runs.app, name="runs")
    app.add_typer(pool.app, name="pool")
    app.add_typer(batch.app, name="batch")
    app.add_typer(dedupe.app, name="dedupe")
    app.add_typer(simulate.app, name="simulate")
    try:  # the CAL loop and simulation commands attach to the ``cal`` group when present
        import qrelkit.cli.cal_loop  # noqa: F401
    except ImportError as exc:
        if exc.name != "qrelkit.cli.cal_loop":
            raise
    app.add_typer(cal.app, name="cal")
    from qrelkit.cli import eval as eval_cli, labels as labels_cli

    app.add_typer(labels_cli.app, name="labels")
    app.add_typer(eval_cli.app, name="eval")
    app.add_typer(__import__("qrelkit.cli.prefs", fromlist=["app"]).app, name="prefs")
    app.add_typer(__import__("qrelkit.cli.reuse", fromlist=["app"]).app, name="reuse")
    app.add_typer(__import__("qrelkit.cli.config_cmd", fromlist=["app"]).app, name="config")
    app.add_typer(__import__("qrelkit.cli.campaign", fromlist=["app"]).app, name="campaign")


_register()


def run(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv``; returns the exit code (used by tests)."""
    try:
        app(args=argv, prog_name="qrelkit", standalone_mode=True)
    except InputError as exc:
        sys.stderr.write(f"qrelkit: error: {exc}\n")
        return 2
    except SystemExit as exc:  # standalone mode always ends here: usage errors are 2
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def main() -> None:
    """Entry point of the console script."""
    sys.exit(run())
