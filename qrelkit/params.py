"""Parameters: every configurable component owns one typed class of them.

A component (a room's function or class that a protocol file configures) declares its section's
keys beside it — name, type, default, range or choices, a one-line description, as
``ir_measures`` declares the parameters of its measures — with :func:`declare`, and owns a
:class:`Params` dataclass whose fields are those keys. ``Params.from_config(cfg, **flags)`` is
the one way from a loaded configuration (and a command's flags) to the values the component
uses: a flag that is not None wins (checked against the key, once), else the configuration's
value (checked when the file was loaded), else the declared default — written once, in the
declaration. The configuration's schema (:data:`qrelkit.config.SCHEMA`, what a protocol file may
set, docs/commands.md) is assembled from these declarations.

This module is the floor of parameters: it imports nothing of qrelkit but the errors, so a
declaration module (``qrelkit/<room>/params.py``) can be imported without its room's machinery
(no numba, no pyarrow), and the schema is checkable without importing it.

>>> from dataclasses import dataclass
>>> from qrelkit.params import Key, Params, declare, param
>>> KEYS = declare("example", Key("depth", "int", 10, "pool depth", min=1), _register=False)
>>> @dataclass(frozen=True)
... class ExampleParams(Params):
...     SECTION = "example"
...     KEYS = KEYS
...     depth: int = param(KEYS, "depth")
>>> ExampleParams().depth, ExampleParams.from_config({"example": {"depth": 20}}).depth
(10, 20)
>>> ExampleParams.from_config({"example": {"depth": 20}}, depth=5).depth
5
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import re
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from qrelkit.errors import InputError


@dataclass(frozen=True)
class Key:
    """One configuration key.

    ``type``: ``int`` | ``float`` | ``bool`` | ``str`` | ``str|int`` | ``list[int]`` | ``list[str]``
    | ``map[int,int]`` (a table of grade -> grade) | ``map[int,str]`` (a table of grade -> text)
    | ``map[str,list[int]]`` (a table of named grade lists). ``optional``: None is allowed (the default None, or ``none`` given with
    ``--set``; TOML has no null). ``choices`` apply to a ``str`` and to each item of a ``list[str]``;
    ``min``/``max`` (inclusive) to numbers and to each item of a ``list[int]``; ``fixed``: the only
    accepted value is the default (the key documents a fixed behaviour); ``unordered``: a list
    whose order means nothing (compared as a set by :func:`qrelkit.config.changed_values`)."""

    name: str
    type: str
    default: Any
    help: str
    choices: tuple | None = None
    min: float | None = None
    max: float | None = None
    optional: bool = False
    fixed: bool = False
    unordered: bool = False  # a list whose order means nothing (a set): reordering it changes no value

    def describe_type(self) -> str:
        t = self.type + (" or none" if self.optional else "")
        if self.choices:
            t += ": " + " / ".join(str(c) for c in self.choices)
        if self.min is not None or self.max is not None:
            lo = "" if self.min is None else f"{self.min:g} <= "
            hi = "" if self.max is None else f" <= {self.max:g}"
            t += f" ({lo}x{hi})"
        return t


UNIT = dict(min=0.0, max=1.0)  # a share or a probability

#: section (``stopping.knee`` for ``[stopping.knee]``) -> key name -> :class:`Key`, as declared
DECLARED: dict[str, dict[str, Key]] = {}


def declare(section: str, *keys: Key, again: bool = False, _register: bool = True) -> dict[str, Key]:
    """Declare the keys of ``[section]`` (a dotted name for a subsection): returns them by name,
    for the component's :class:`Params` class. A section is declared once (again with the same
    keys: nothing changes; with other keys: an error, two components would own it — unless
    ``again``: a registry's section, registered again, takes the new keys). The dict returned is
    the one :data:`DECLARED` holds (and the assembled schema): a change (:func:`add_choice`) is
    seen by both."""
    out = {k.name: k for k in keys}
    if len(out) != len(keys):
        raise ValueError(f"[{section}] declares a key twice")
    if not _register:
        return out
    known = DECLARED.setdefault(section, out)
    if known != out:
        if not again:
            raise ValueError(f"[{section}] is declared twice, with other keys")
        known.clear()
        known.update(out)
    return known


def add_choice(section: str, key: str, value: Any) -> None:
    """Make ``value`` one of the choices of the declared ``[section] key`` (a registry's new name:
    ``[pool] kind``), in the declaration itself: the component's class checks against it, and
    the assembled schema (:data:`qrelkit.config.SCHEMA`) holds the same dict."""
    keys = DECLARED[section]
    k = keys[key]
    if value not in (k.choices or ()):
        keys[key] = dataclasses.replace(k, choices=(*(k.choices or ()), value))


# --------------------------------------------------------------------------- checking one value

TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
              "str|int": "a string or an integer", "list[int]": "a list of integers",
              "list[str]": "a list of strings", "map[int,int]": "a table of grade = grade",
              "map[int,str]": "a table of grade = \"text\"",
              "map[str,list[int]]": "a table of name = [grades]"}


def what(value: Any) -> str:
    """A value as an error message shows it, with its kind (``"x" (a string)``)."""
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)
    shown = f'"{value}"' if isinstance(value, str) else ("true" if value else "false") if isinstance(value, bool) \
        else repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{shown} ({kind})"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _type_ok(t: str, value: Any) -> tuple[bool, Any]:
    """Whether ``value`` has the key type ``t``, and the value as stored."""
    if t == "int":
        return _is_int(value), value
    if t == "float":
        return _is_num(value), float(value) if _is_num(value) else value
    if t == "bool":
        return isinstance(value, bool), value
    if t == "str":
        return isinstance(value, str), value
    if t == "str|int":
        return isinstance(value, str) or _is_int(value), value
    if t in ("list[int]", "list[str]"):
        value = list(value) if isinstance(value, tuple) else value
        item_ok = _is_int if t == "list[int]" else (lambda x: isinstance(x, str))
        return isinstance(value, list) and all(item_ok(x) for x in value), value
    if t == "map[int,int]":
        return isinstance(value, Mapping) and all(re.fullmatch(r"-?\d+", str(k)) and _is_int(v)
                                                  for k, v in value.items()), value
    if t == "map[int,str]":
        return isinstance(value, Mapping) and all(re.fullmatch(r"-?\d+", str(k)) and isinstance(v, str)
                                                  for k, v in value.items()), value
    if t == "map[str,list[int]]":
        return isinstance(value, Mapping) and all(isinstance(v, list) and all(_is_int(x) for x in v)
                                                  for v in value.values()), value
    raise AssertionError(f"unknown key type {t}")  # pragma: no cover - a declaration's typo


def check(spec: Key, section: str, value: Any, file: str | None = None, line: int | None = None) -> Any:
    """``value`` checked against the key ``spec`` of ``[section]``, returned as stored (an
    integer given for a float key becomes a float); raises :class:`InputError` ``bad-type``,
    ``out-of-range`` or ``bad-choice``."""
    name = f"[{section}] {spec.name}"

    def bad(rule: str, msg: str) -> InputError:
        return InputError(rule, f"{name} {msg}", file, line)

    if value is None or (spec.optional and isinstance(value, str) and value.strip().lower() == "none"):
        if spec.optional:
            return None
        raise bad("bad-type", f"must be {TYPE_WORDS[spec.type]}, got none")
    ok, value = _type_ok(spec.type, value)
    if not ok:
        raise bad("bad-type", f"must be {TYPE_WORDS[spec.type]}, got {what(value)}")
    if spec.fixed and value != spec.default:
        raise bad("bad-choice", f"is fixed to {spec.default!r}, got {value!r}")
    items = value if isinstance(value, list) else [value]
    if spec.choices is not None:
        for v in items:
            if v not in spec.choices:
                close = difflib.get_close_matches(str(v), [str(c) for c in spec.choices], n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise bad("bad-choice", f"must be one of {', '.join(map(str, spec.choices))}, got {v!r}{hint}")
    if spec.min is not None or spec.max is not None:
        for v in items:
            if _is_num(v) and ((spec.min is not None and v < spec.min) or (spec.max is not None and v > spec.max)):
                lo = "" if spec.min is None else f">= {spec.min:g}"
                hi = "" if spec.max is None else f"<= {spec.max:g}"
                raise bad("out-of-range", f"must be {' and '.join(x for x in (lo, hi) if x)}, got {v!r}")
    return value


# --------------------------------------------------------------------------- a library function's defaults


class _AsDeclared:
    """The default of a library parameter that takes a configuration key's declared default."""

    def __repr__(self) -> str:
        return "AS_DECLARED"


#: the default of a library function's parameter whose value is a declared key's default
#: (:func:`declared_defaults` puts that default in its place when the function is defined)
AS_DECLARED: Any = _AsDeclared()


def declared_defaults(keys: Mapping[str, Key] | type, **aliases: str | Key):
    """A decorator: each parameter of the function whose default is :data:`AS_DECLARED` takes
    the declared default of the key of its name in ``keys`` (a declaration, or a :class:`Params`
    class), or of ``aliases[parameter]`` (a key name, or another section's :class:`Key`). The
    default is then written once, in the declaration; the function keeps its plain signature (no
    wrapper, no cost per call: its defaults are set once). A list default becomes a tuple.

    >>> KEYS = declare("example", Key("depth", "int", 10, "pool depth", min=1), _register=False)
    >>> @declared_defaults(KEYS, k="depth")
    ... def pool(runs, depth=AS_DECLARED, *, k=AS_DECLARED, other=3):
    ...     return depth, k, other
    >>> pool(None)
    (10, 10, 3)
    """
    table: Mapping[str, Key] = keys.KEYS if isinstance(keys, type) else keys

    def value(name: str) -> Any:
        ref = aliases.get(name, name)
        v = copy.deepcopy((ref if isinstance(ref, Key) else table[ref]).default)
        return tuple(v) if isinstance(v, list) else v

    def deco(fn):
        code = fn.__code__
        if fn.__defaults__:
            names = code.co_varnames[code.co_argcount - len(fn.__defaults__):code.co_argcount]
            fn.__defaults__ = tuple(value(n) if d is AS_DECLARED else d for n, d in zip(names, fn.__defaults__))
        if fn.__kwdefaults__:
            fn.__kwdefaults__ = {n: value(n) if d is AS_DECLARED else d for n, d in fn.__kwdefaults__.items()}
        return fn

    return deco


# --------------------------------------------------------------------------- a component's class

_MISSING = object()


def param(keys: Mapping[str, Key], name: str) -> Any:
    """A dataclass field whose default is the declared default of ``keys[name]`` (a list or a
    table copied for each instance): the default is written once, in the declaration."""
    value = keys[name].default
    if isinstance(value, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(value))
    return dataclasses.field(default=value)


def lookup(cfg: Mapping | None, section: str, key: str) -> Any:
    """``cfg[top][sub][key]`` for ``section`` ``top.sub`` (``cfg[section][key]`` for a plain
    one), or a sentinel (:func:`is_missing`) when the configuration does not hold it."""
    if cfg is None:
        return _MISSING
    node: Any = cfg
    for part in section.split("."):
        node = node.get(part, {}) if isinstance(node, Mapping) else {}
    return node.get(key, _MISSING) if isinstance(node, Mapping) else _MISSING


def is_missing(value: Any) -> bool:
    return value is _MISSING


class Params:
    """The base of a component's parameters: a (frozen) dataclass whose fields are the keys of
    ``SECTION`` declared in ``KEYS`` (a field takes the key of its name; ``SOURCES`` maps a field to
    ``(section, key)`` when it reads another name or another section's key, e.g. ``relevant`` from
    ``[labels] passage_relevant``). :meth:`from_config` is the one way from a configuration and
    flags to an instance; :meth:`coerce` (a subclass hook) turns a stored value into the field's
    Python type (a list into a tuple, "none" into None, ...)."""

    SECTION: ClassVar[str] = ""
    KEYS: ClassVar[Mapping[str, Key]] = {}
    SOURCES: ClassVar[Mapping[str, tuple[str, str]]] = {}

    @classmethod
    def key_of(cls, field: str) -> tuple[str, str]:
        """``(section, key)`` the field ``field`` is configured by."""
        return cls.SOURCES.get(field, (cls.SECTION, field))

    @classmethod
    def from_config(cls, cfg: Mapping | None = None, **flags: Any):
        """The parameters of a configuration (``None``: the defaults) with ``flags``: a flag that
        is not None wins, checked against its key (``[bad-type]``, ``[out-of-range]``,
        ``[bad-choice]``); a field the configuration does not hold keeps its declared default.
        An unknown flag is a programming error (``TypeError``)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(flags) - names
        if unknown:
            raise TypeError(f"{cls.__name__} has no parameter {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {}
        for name in names:
            section, key = cls.key_of(name)
            flag = flags.get(name)
            if flag is not None:
                spec = _spec(cls, section, key)
                flag = cls.coerce(name, flag)
                values[name] = cls.coerce(name, check(spec, section, flag, file="<flag>")) if spec else flag
            else:
                v = lookup(cfg, section, key)
                if not is_missing(v):
                    values[name] = cls.coerce(name, copy.deepcopy(v))
        if cfg is not None and not getattr(cfg, "checked", False):
            return cls(**values)  # a plain mapping's values: checked as the instance is made
        token = _CHECKED.set(True)  # every value checked already: a loaded configuration's, a flag's, a default
        try:
            return cls(**values)
        finally:
            _CHECKED.reset(token)

    def __post_init__(self) -> None:
        """Every field with a declared key is checked against it (a value built in Python, or a
        plain mapping's: the same rules as a protocol file's) — once: not again for the values of a
        loaded configuration (:attr:`qrelkit.config.Config.checked`) and the flags
        :meth:`from_config` checked."""
        if _CHECKED.get():
            return
        for f in dataclasses.fields(self):
            section, key = self.key_of(f.name)
            spec = _spec(type(self), section, key)
            if spec is not None:
                check(spec, section, getattr(self, f.name))

    @classmethod
    def coerce(cls, field: str, value: Any) -> Any:
        """A stored value as the field holds it (the identity here; subclasses convert)."""
        return value

    @classmethod
    def declared_default(cls, field: str) -> Any:
        """The declared default of the key behind ``field`` (a copy)."""
        section, key = cls.key_of(field)
        spec = _spec(cls, section, key)
        return None if spec is None else copy.deepcopy(spec.default)


#: set while :meth:`Params.from_config` makes an instance of values it knows are checked
_CHECKED: ContextVar[bool] = ContextVar("qrelkit_params_checked", default=False)


def _spec(cls: type, section: str, key: str) -> Key | None:
    """The declaration of ``[section] key``: the class's own keys, else any declared section."""
    if section == cls.SECTION and key in cls.KEYS:
        return cls.KEYS[key]
    return DECLARED.get(section, {}).get(key)
