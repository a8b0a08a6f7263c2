"""The ``qrelkit`` command line: thin Typer commands over the library.

Bad input never crashes: an :class:`~qrelkit.errors.InputError` becomes one line on stderr
(``qrelkit: error: FILE:LINE: [rule] message``) and exit code 2, with no output written.

The command line starts fast (issue 24): :func:`run` imports only the group it is asked for
(``qrelkit pool depth ...`` imports ``qrelkit/cli/pool.py``, no other group), and ``qrelkit
--help`` lists the groups from :data:`HELP` without importing any. A group module imports its
library functions inside its commands, so ``qrelkit GROUP [COMMAND] --help`` loads no pandas,
pyarrow, numba, scipy, scikit-learn or ir_measures either (tests/test_cli_startup.py). The
whole tree, every group registered, is :data:`app` (built at its first use: tests, docs).
"""

from __future__ import annotations

import errno
import importlib
import inspect
import sys
import weakref

import typer
from typer.core import TyperCommand, TyperGroup

from qrelkit import jit
from qrelkit.cli import help as wrapped_help
from qrelkit.errors import InputError, disk_full

HELP_TEXT = ("Build TREC-style test collections: validate runs, build judgment pools, make assessor batches, "
             "aggregate and propagate labels, evaluate runs.")

#: the command groups, by name: each is the ``app`` of one module of this package (``qrelkit/cli/MODULE.py``)
GROUPS = {"runs": "runs", "pool": "pool", "batch": "batch", "dedupe": "dedupe", "simulate": "simulate", "cal": "cal",
          "labels": "labels", "eval": "eval", "prefs": "prefs", "reuse": "reuse", "config": "config_cmd",
          "campaign": "campaign", "study": "study"}
#: the commands of the root itself, by name: each is the ``command`` of one module of this package
COMMANDS = {"serve": "serve", "warmup": "warmup"}
#: each group's and root command's line in ``qrelkit --help``, written once: a group module's Typer
#: takes its help from here, a root command its short help; the root's listing reads it without
#: importing the module
HELP = {
    "runs": "Validate and canonicalize runs.",
    "pool": "Build judgment pools with provenance.",
    "batch": "Assessor batches: export, import.",
    "dedupe": "Near-duplicate passages: cluster, describe, dedupe runs, expand qrels.",
    "simulate": "Generate synthetic judging campaigns.",
    "cal": "Continuous active learning: judging store, stopping rules.",
    "labels": "Labels: aggregate assessors, binarize, propagate to duplicates and documents.",
    "eval": "Evaluate runs with ir-measures; duplicates in evaluation; compare runs.",
    "prefs": "Preference judgments on shallow top-1 pools: pairs, crowd tasks, tournament, win ratios, re-scoring.",
    "reuse": "Reusability studies: leave-one-group-out simulation and its report.",
    "config": "The protocol configuration: effective values and their origin.",
    "campaign": "Run a whole judging campaign from one folder and its store.",
    "study": "Studies of an existing collection: judging budgets and adjudication strategies.",
    "serve": "Serve the campaign to its assessors in the browser (the web app, docs/web.md).",
    "warmup": "Compile every numba kernel into its on-disk cache once, ahead of the first run (make install runs it).",
}


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version  # lazy: only --version reads the package metadata

        sys.stdout.write(f"qrelkit {version('qrelkit')}\n")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print qrelkit's version (from the installed package) and exit."),
) -> None:
    pass


def _new_app(cls: type[TyperGroup] | None = None) -> typer.Typer:
    """The root Typer with its options, empty: the one of :func:`run` (``cls`` :class:`_LazyRoot`)
    and the one of :data:`app` are made alike."""
    root = typer.Typer(name="qrelkit", help=HELP_TEXT, no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False, **({"cls": cls} if cls else {}),
                       context_settings={"help_option_names": ["-h", "--help"]})  # every group and command inherits them
    root.callback()(_root)
    return root


def _attach(root: typer.Typer, name: str) -> None:
    """Attach one group or root command to ``root``, one way: imported by module name."""
    if name in GROUPS:
        root.add_typer(importlib.import_module(f"qrelkit.cli.{GROUPS[name]}").app, name=name)
    else:
        root.command(name, short_help=HELP[name])(importlib.import_module(f"qrelkit.cli.{COMMANDS[name]}").command)


#: the help objects already escaped (held weakly: an id could be a later object's)
_ESCAPED: weakref.WeakSet = weakref.WeakSet()


def _escaped(text: str) -> str:
    from rich.markup import escape  # lazy: only help text needs it, and rich.markup loads most of rich

    return escape(wrapped_help.reflow(text))


def _escape_help(typer_app: typer.Typer) -> None:
    """rich reads help text as markup, so '[pool]' or '[rule]' would vanish from ``--help``:
    escape every help string (groups, commands and their docstrings, options), each object once
    (a module's commands are attached to :func:`run`'s root and to :data:`app`; ``common.ConfigOpt``
    is every command's);
    and reflow it (:func:`qrelkit.cli.help.reflow`): rich wraps each paragraph at words."""

    def fix(info) -> None:
        if info in _ESCAPED:
            return
        _ESCAPED.add(info)
        for attr in ("help", "short_help"):
            if isinstance(getattr(info, attr, None), str):
                setattr(info, attr, _escaped(getattr(info, attr)))

    fix(typer_app.info)
    for cmd in typer_app.registered_commands:
        if cmd.help is None:
            cmd.help = inspect.getdoc(cmd.callback)
        fix(cmd)
        for p in inspect.signature(cmd.callback).parameters.values():
            fix(p.default)
    for group in typer_app.registered_groups:
        fix(group)
        _escape_help(group.typer_instance)


class _Listed(TyperCommand):
    """A group or root command as ``qrelkit --help`` lists it (its name and :data:`HELP` line),
    its module not imported."""


def _help_flags_false(cmd, ctx) -> None:
    """Give the help flag of ``cmd`` and of every command below it the default False: typer
    coerces a flag left at None through pydantic (its import: about 0.1 s of ``qrelkit GROUP
    --help``), a bool it passes as it is. The flag means the same."""
    flag = cmd.get_help_option(ctx)
    if flag is not None and flag.default is None:
        flag.default = False
    for sub in getattr(cmd, "commands", {}).values():
        _help_flags_false(sub, ctx)


class _LazyRoot(TyperGroup):
    """The root group of :func:`run`: lists every group and root command, and imports a module
    only when its name is resolved (``qrelkit pool ...``): the command line's start-up does not
    grow with the number of groups."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        for name in [*COMMANDS, *GROUPS]:  # typer lists a root's commands before its groups
            self.commands.setdefault(name, _Listed(name=name, help=_escaped(HELP[name])))

    def parse_args(self, ctx, args):
        _help_flags_false(self, ctx)
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx, args):
        if args and isinstance(self.commands.get(args[0]), _Listed):
            root = _new_app()
            _attach(root, args[0])
            _escape_help(root)
            self.commands[args[0]] = typer.main.get_group(root).commands[args[0]]
            _help_flags_false(self.commands[args[0]], ctx)
        return super().resolve_command(ctx, args)


def _full_app() -> typer.Typer:
    """Every group and root command attached and escaped: :data:`app`."""
    root = _new_app()
    for name in [*GROUPS, *COMMANDS]:
        _attach(root, name)
    _escape_help(root)
    return root


def __getattr__(name: str):
    """``app``: the whole command tree (every group imported), built at its first use (PEP 562);
    :func:`run` does not need it."""
    if name == "app":
        globals()["app"] = value = _full_app()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: :func:`run`'s root: groups imported when named
_ROOT = _new_app(_LazyRoot)


def _say_compiling() -> None:
    sys.stderr.write(jit.NOTICE + "\n")
    sys.stderr.flush()


def run(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv``; returns the exit code (used by tests). Whichever
    command it is, numba compiling a kernel (a cold on-disk cache) is said once on stderr."""
    wrapped_help.install()  # --help wraps at words in any terminal
    try:
        with jit.compile_notice(_say_compiling):
            _ROOT(args=argv, prog_name="qrelkit", standalone_mode=True)
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
