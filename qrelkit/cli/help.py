"""``--help`` that wraps at words in any terminal.

typer lays a command's options out as one table row each (names, negative names, type, help).
In a narrow terminal (60 columns) or for long option names (``--require-original-relevant /
--no-require-original-relevant``) the row cannot fit and rich cuts names and words with "…".
:func:`install` wraps typer's options panel: the table is drawn as typer draws it when it fits
(rendered once, captured, to check), else each option is stacked: its names on one line, its
help below it, indented and wrapped at words. Help text itself is written for it: :func:`reflow`
(each paragraph on one line), :func:`examples` (a command's "Examples:" section).
"""

from __future__ import annotations

import importlib
import inspect
import io
import re
import sys
import types
from typing import Any, Callable

import rich
from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.text import Text


#: the heading of a command's examples in its help (:func:`examples`): one command per line below it
EXAMPLES = "Examples:"


def examples(*commands: str) -> Callable:
    """Decorator (under ``@app.command``): end the command's help with an "Examples:" section,
    one command line each, as ``--help`` and docs/commands.md show them.

    >>> @examples("qrelkit campaign status camp")
    ... def status():
    ...     "Per topic: where it stands."
    >>> print(status.__doc__)
    Per topic: where it stands.
    <BLANKLINE>
    Examples:
      qrelkit campaign status camp
    """
    def add(fn: Callable) -> Callable:
        fn.__doc__ = inspect.cleandoc(fn.__doc__ or "") + f"\n\n{EXAMPLES}\n" + "\n".join(f"  {c}" for c in commands)
        return fn

    return add


def reflow(text: str) -> str:
    r"""Help text as rich should wrap it, at words: each paragraph on one line (a docstring's line
    breaks would otherwise show mid-sentence), an "Examples:" section one command per line.

    >>> reflow("Split each pool,\n    in a seeded order.\n\nExamples:\n  qrelkit a\n  qrelkit b")
    'Split each pool, in a seeded order.\n\nExamples:\n  qrelkit a\n  qrelkit b'
    """
    paragraphs = re.split(r"\n\s*\n", inspect.cleandoc(text))
    return "\n\n".join(p if p.startswith(EXAMPLES) else " ".join(p.split()) for p in paragraphs)


def _names(param: Any) -> str:
    """``--output, -o`` (``--lenient, / --strict`` for a flag pair), ``*`` first when required."""
    first = ", ".join(sorted(param.opts, key=lambda o: (not o.startswith("--"), o)))
    if getattr(param, "param_type_name", "") == "argument":
        first = str(getattr(param, "display_name_raw", None) or param.name) + ("..." if param.nargs != 1 else "")
    second = ", ".join(param.secondary_opts)
    return ("* " if param.required else "") + first + (f" / {second}" if second else "")


def _stacked(rich_utils: Any, *, name: str, params: list, ctx: Any, markup_mode: str, console: Console) -> None:
    rows: list = []
    for p in params:
        kind = p.display_type_rich(ctx=ctx) if hasattr(p, "display_type_rich") else None
        head = Text(_names(p), style=rich_utils.STYLE_OPTION, overflow="fold")
        if kind:
            head.append(f"  {kind}", style=rich_utils.STYLE_TYPES)
        rows += [head, Padding(rich_utils._get_parameter_help(param=p, ctx=ctx, markup_mode=markup_mode), (0, 0, 0, 4))]
    console.print(Panel(Group(*rows), border_style=rich_utils.STYLE_OPTIONS_PANEL_BORDER, title=name,
                        title_align=rich_utils.ALIGN_OPTIONS_PANEL))


def _fits(table_panel: Callable, console: Console, kwargs: dict) -> bool:
    """Whether typer's table shows every name and word whole at this width (no "…")."""
    probe = Console(file=io.StringIO(), width=console.width, color_system=None, force_terminal=False)
    table_panel(console=probe, **kwargs)
    return "…" not in probe.file.getvalue()


def _table_if_it_fits(table_panel: Callable, console: Console, kwargs: dict) -> bool:
    """Print typer's table when it shows every name and word whole (no "…"), rendered once (the
    console's own rendering, captured, is what it would have printed); returns whether it did."""
    if console.legacy_windows or console.is_jupyter:  # they do not print the text a capture holds
        if not _fits(table_panel, console, kwargs):
            return False
        table_panel(console=console, **kwargs)
        return True
    with console.capture() as capture:
        table_panel(console=console, **kwargs)
    text = capture.get()
    if "…" in text:
        return False
    console.file.write(text)
    return True


def _real_markdown() -> types.ModuleType:
    """rich.markdown itself, imported now (the stand-in :func:`defer_markdown` put in its place is
    dropped first)."""
    if getattr(sys.modules.get("rich.markdown"), "_qrelkit_deferred", False):
        del sys.modules["rich.markdown"]
    real = importlib.import_module("rich.markdown")
    sys.modules["rich"].markdown = real
    return real


def _markdown_attribute(name: str) -> Any:
    """A name the stand-in lacks: from the real module; the import system's questions (``__path__``:
    is it a package?) are answered as for a plain module, without loading it."""
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    return getattr(_real_markdown(), name)


def defer_markdown() -> None:
    """Put off importing rich.markdown until something uses it. typer.rich_utils imports it for
    help written in Markdown (``rich_markup_mode="markdown"``, which qrelkit does not use), and with
    it markdown-it: about 0.07 s of every ``--help`` (issue 24). Until then a stand-in module holds
    its place: its ``Markdown`` makes the real one, and any other name loads the real module, which
    then replaces the stand-in."""
    if "rich.markdown" in sys.modules:
        return
    class Markdown:
        """Stand-in for rich.markdown.Markdown: making one makes the real one."""

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return _real_markdown().Markdown(*args, **kwargs)

    stand_in = types.ModuleType("rich.markdown", "stand-in until used (qrelkit.cli.help.defer_markdown)")
    stand_in.Markdown = Markdown  # type: ignore[attr-defined]
    stand_in._qrelkit_deferred = True  # type: ignore[attr-defined]
    stand_in.__getattr__ = _markdown_attribute  # type: ignore[attr-defined]
    sys.modules["rich.markdown"] = stand_in
    rich.markdown = stand_in  # type: ignore[attr-defined]


def install() -> None:
    """Wrap typer's options panel (typer.rich_utils) as the module says; a typer without it is left as
    it is. rich.markdown is put off (:func:`defer_markdown`)."""
    defer_markdown()
    try:
        from typer import rich_utils  # lazy: rich help is typer's optional part
    except ImportError:
        return
    table_panel = getattr(rich_utils, "_print_options_panel", None)
    if table_panel is None or getattr(table_panel, "_qrelkit", False):
        return

    def options_panel(*, console: Console, **kwargs: Any) -> None:
        if not kwargs.get("params"):
            table_panel(console=console, **kwargs)
        elif not _table_if_it_fits(table_panel, console, kwargs):
            _stacked(rich_utils, console=console, **kwargs)

    options_panel._qrelkit = True  # type: ignore[attr-defined]
    rich_utils._print_options_panel = options_panel
