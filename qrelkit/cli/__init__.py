"""The ``qrelkit`` command line: thin Typer commands over the library.

Bad input never crashes: an :class:`~qrelkit.errors.InputError` becomes one line on stderr
(``qrelkit: error: FILE:LINE: [rule] message``) and exit code 2, with no output written.
"""

from __future__ import annotations

import errno
import importlib
import inspect
import sys

import typer
from rich.markup import escape

from qrelkit.cli.common import reflow
from qrelkit.errors import InputError, disk_full

app = typer.Typer(
    name="qrelkit",
    help="Build TREC-style test collections: validate runs, build judgment pools, make assessor batches, aggregate and propagate labels, evaluate runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # every group and command inherits them
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version  # lazy: only --version reads the package metadata

        sys.stdout.write(f"qrelkit {version('qrelkit')}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print qrelkit's version (from the installed package) and exit."),
) -> None:
    pass


#: the command groups, by name: each is the ``app`` of one module of this package (``qrelkit/cli/MODULE.py``)
GROUPS = {"runs": "runs", "pool": "pool", "batch": "batch", "dedupe": "dedupe", "simulate": "simulate", "cal": "cal",
          "labels": "labels", "eval": "eval", "prefs": "prefs", "reuse": "reuse", "config": "config_cmd",
          "campaign": "campaign", "study": "study"}
#: the commands of the root itself, by name: each is the ``command`` of one module of this package
COMMANDS = {"serve": "serve"}


def _register() -> None:
    """Attach every group and root command, one way: imported by module name (after ``app``
    exists: the command modules import ``qrelkit.cli.common``, which imports this package)."""
    for name, module in GROUPS.items():
        app.add_typer(importlib.import_module(f"qrelkit.cli.{module}").app, name=name)
    for name, module in COMMANDS.items():
        app.command(name)(importlib.import_module(f"qrelkit.cli.{module}").command)


_register()


def _escape_help() -> None:
    """rich reads help text as markup, so '[pool]' or '[rule]' would vanish from ``--help``:
    escape every help string (groups, commands and their docstrings, options), each object once;
    and reflow it (:func:`qrelkit.cli.common.reflow`): rich wraps each paragraph at words."""
    seen: set[int] = set()

    def fix(info) -> None:
        if id(info) not in seen and isinstance(getattr(info, "help", None), str):
            seen.add(id(info))
            info.help = escape(reflow(info.help))

    def walk(typer_app) -> None:
        fix(typer_app.info)
        for cmd in typer_app.registered_commands:
            if cmd.help is None:
                cmd.help = inspect.getdoc(cmd.callback)
            fix(cmd)
            for p in inspect.signature(cmd.callback).parameters.values():
                fix(p.default)
        for group in typer_app.registered_groups:
            fix(group)
            walk(group.typer_instance)

    walk(app)


_escape_help()
__import__("qrelkit.cli.help", fromlist=["install"]).install()  # --help wraps at words in any terminal


def run(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv``; returns the exit code (used by tests)."""
    try:
        app(args=argv, prog_name="qrelkit", standalone_mode=True)
    except InputError as exc:
        sys.stderr.write(f"qrelkit: error: {' '.join(str(exc).splitlines())}\n")  # one line, always
        return 2
    except OSError as exc:  # a file-system failure is the user's to fix: one line (SQLite's: the store's InputError)
        err = disk_full(exc)
        if err is None and exc.filename is None:
            raise  # anything else is a bug: keep the traceback
        sys.stderr.write(f"qrelkit: error: {err or os_error(exc)}\n")
        return 2
    except SystemExit as exc:  # standalone mode always ends here: usage errors are 2
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def os_error(exc: OSError) -> InputError:
    """The one-line form of a file-system error on a named file: ``unreadable`` for a missing
    file, ``permission-denied``, ``unwritable-output`` for a read-only disk, ``disk-full``
    (:func:`disk_full`), else ``os-error``."""
    full = disk_full(exc)
    if full is not None:
        return full
    rule = {errno.ENOENT: "unreadable", errno.EACCES: "permission-denied", errno.EROFS: "unwritable-output",
            errno.EPERM: "permission-denied"}
    target = exc.filename2 if exc.filename2 is not None else exc.filename
    return InputError(rule.get(exc.errno, "os-error"), exc.strerror or str(exc), file=str(target))


def main() -> None:
    """Entry point of the console script."""
    sys.exit(run())
