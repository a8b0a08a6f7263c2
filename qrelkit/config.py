"""Protocol configuration files (TOML) and their one declared schema.

A config holds every threshold of a judging protocol (see ``configs/trec-dl-2022.toml``).
Commands take ``--config FILE``; an explicit flag overrides the file; the built-in defaults
(the TREC 2022 Deep Learning values) fill whatever the file leaves out.

:data:`SCHEMA` declares every section and key: its type, range or choices, default and a
one-line help; the stopping rules and pool kinds add theirs as they register (a rule's
``[stopping.<rule>]``, the choices of ``[stopping] rule`` and ``[pool] kind``: :func:`declare_section`,
:func:`load_plugins`). It is the single source of defaults (:func:`defaults_tree`, :func:`default`, the
library's parameter classes, docs/commands.md). A file is validated when it is loaded: an
unknown section or key is ``[unknown-key]`` (with the closest known name), a value of the
wrong type ``[bad-type]`` (an integer key takes no float and no bool: ``depth = 2.5`` is an
error, not 2), a number outside its range ``[out-of-range]``, a word outside its choices
``[bad-choice]`` — each with the file and line. Flag values given to :meth:`Config.get_value`
pass the same checks.
"""

from __future__ import annotations

import copy
import difflib
import importlib
import json
import os
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from qrelkit.errors import InputError
from qrelkit.params import DECLARED, Key, Params, check, declare, param, what
from qrelkit.params import add_choice as declare_choice

# --------------------------------------------------------------------------- the schema


def _keys(*keys: Key) -> dict[str, Key]:
    return {k.name: k for k in keys}


CAMPAIGN_STAGES = ("validate", "select", "dedupe", "pool", "screening", "pool-rest", "fractional", "cal", "qrels",
                   "evaluate", "reuse", "report")


# --------------------------------------------------------------------------- the protocol's own sections
#
# What no room owns: the protocol's name and plugins, how a campaign runs, the web app. Declared
# here (the campaign and the web app sit above this module), each with its parameters class.

PROTOCOL_KEYS = declare(
    "protocol",
    Key("name", "str", "", "name of the protocol (informative)"),
    Key("source", "str", "", "where the protocol is published (informative)"),
    Key("plugins", "list[str]", [], "modules imported when the file is loaded, before it is checked: they register "
        "stopping rules and pool kinds (with their sections, e.g. [stopping.<rule>]); also $QRELKIT_PLUGINS"),
)


@dataclass(frozen=True)
class ProtocolParams(Params):
    """``[protocol]``: the protocol's name, where it is published, its plugin modules."""

    SECTION = "protocol"
    KEYS = PROTOCOL_KEYS

    name: str = param(KEYS, "name")
    source: str = param(KEYS, "source")
    plugins: list = param(KEYS, "plugins")


CAMPAIGN_KEYS = declare(
    "campaign",
    Key("skip", "list[str]", [], "stages left out, e.g. [\"cal\"] or [\"fractional\"] (validate, select, pool and "
        "qrels always run)", choices=CAMPAIGN_STAGES, unordered=True),
    Key("assessors", "list[str]", ["A01", "A02", "A03", "A04"], "named assessors; topic i is owned by assessor "
        "i mod n"),
    Key("owner_judges_cal", "bool", True, "the assessor who screened a topic judges its CAL rounds (else: "
        "round-robin over the assessors)"),
    Key("combine", "str", "median_high", "several assessors' grades of one item -> one grade before screening, "
        "CAL, stopping and the qrels: median_high | max | min, or vote (the labels' majority vote: [labels] "
        "vote_threshold, graded, fallback)", choices=("median_high", "max", "min", "vote")),
    Key("max_rounds", "int", 40, "CAL rounds at most; threads still active then stop (rule max-rounds)", min=1),
    Key("workers", "int", 0, "near-duplicates and the CAL features on a Dask LocalCluster of this many worker "
        "processes (the same outputs, memory bounded per worker); 0: in the campaign's own process", min=0),
    Key("scheduler", "str", None, "near-duplicates and the CAL features on the workers of this running Dask "
        "scheduler, e.g. tcp://host:8786 (the corpus and the campaign folder on storage they share)", optional=True),
)


@dataclass(frozen=True)
class CampaignParams(Params):
    """``[campaign]``: the stages left out, the assessors, who judges CAL rounds, how grades
    combine, the rounds at most, where the heavy corpus stages run (Dask)."""

    SECTION = "campaign"
    KEYS = CAMPAIGN_KEYS

    skip: list = param(KEYS, "skip")
    assessors: list = param(KEYS, "assessors")
    owner_judges_cal: bool = param(KEYS, "owner_judges_cal")
    combine: str = param(KEYS, "combine")
    max_rounds: int = param(KEYS, "max_rounds")
    workers: int = param(KEYS, "workers")
    scheduler: str | None = param(KEYS, "scheduler")

    def dask(self) -> dict | None:
        """``{"scheduler": ADDR}`` or ``{"workers": N}`` (the keyword of
        :func:`qrelkit.cal.features.build_features`) when the heavy corpus stages run on Dask, else None."""
        return {"scheduler": self.scheduler} if self.scheduler else {"workers": self.workers} if self.workers else None


WEB_KEYS = declare(
    "web",
    Key("free_topic_choice", "bool", False, "assessors of the web app (qrelkit serve) see every topic, not only "
        "those of their batches, and may take a topic's places held by assessors without an account"),
    Key("max_request_bytes", "int", 1_048_576, "a request whose body is larger is refused unread (413)", min=1024),
    Key("session_idle_minutes", "int", 480, "a session unused this long ends (its person opens a new login link)",
        min=1),
    Key("login_link_hours", "int", 72, "a login link not exchanged for a session within this time stops working "
        "('qrelkit campaign assessor add --renew' issues a new one)", min=1),
    Key("timeout_keep_alive", "int", 5, "seconds an idle keep-alive connection is kept open (uvicorn)", min=1),
    Key("limit_concurrency", "int", 200, "connections served at once; more are answered 503 (uvicorn)", min=1),
    Key("grade_definitions", "map[int,str]", {}, "what each grade means, shown beside the grade buttons, e.g. "
        "{ 0 = \"The passage has nothing to do with the query.\" }; none given on the scale 0-3: the TREC DL "
        "definitions"),
    Key("guidelines", "str", None, "the assessors' guidelines: a Markdown file (UTF-8), its path relative to the "
        "protocol file, checked at campaign init and shown by the web app (key g); none: no guidelines page",
        optional=True),
)


@dataclass(frozen=True)
class WebParams(Params):
    """``[web]``: the assessors' web app."""

    SECTION = "web"
    KEYS = WEB_KEYS

    free_topic_choice: bool = param(KEYS, "free_topic_choice")
    max_request_bytes: int = param(KEYS, "max_request_bytes")
    session_idle_minutes: int = param(KEYS, "session_idle_minutes")
    login_link_hours: int = param(KEYS, "login_link_hours")
    timeout_keep_alive: int = param(KEYS, "timeout_keep_alive")
    limit_concurrency: int = param(KEYS, "limit_concurrency")
    grade_definitions: dict = param(KEYS, "grade_definitions")
    guidelines: str | None = param(KEYS, "guidelines")


#: the modules whose components declare their sections (:func:`qrelkit.params.declare`), each
#: importing nothing of qrelkit but :mod:`qrelkit.params`: loading the schema never loads a room's
#: machinery (no numba). A component's section is declared there, beside its parameters class.
DECLARATION_MODULES: tuple[str, ...] = ("qrelkit.io.params", "qrelkit.dedupe.params", "qrelkit.labels.params",
                                              "qrelkit.evaluate.params", "qrelkit.reuse.params",
                                              "qrelkit.prefs.params", "qrelkit.cal.params", "qrelkit.pooler.params")

#: the order of the sections (of :meth:`Config.effective`, docs/commands.md, ``config show``):
#: the protocol's own first, then the rooms' in the order a campaign uses them; sections declared
#: by other modules (plugins) follow, in the order they were declared
SECTION_ORDER = ("protocol", "sources", "runs", "selection", "pool", "top1", "fused", "screen", "fractional", "batch", "labels",
                 "eval", "prefs", "cal", "stopping", "stopping.knee", "stopping.budget", "stopping.target", "reuse",
                 "campaign", "web", "dedupe")


class _Schema(Mapping):
    """:data:`SCHEMA`: every section and key a protocol file may set, assembled at its first use
    from the components' declarations (:data:`DECLARATION_MODULES`, imported then) and the
    sections declared here (the protocol's own), in :data:`SECTION_ORDER`."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, Key]] | None = None
        self._declared = 0  # sections of DECLARED seen: a declared section is the same dict here and there

    def _get(self) -> dict[str, dict[str, Key]]:
        if self._data is None:
            for name in DECLARATION_MODULES:
                importlib.import_module(name)  # a declaration module: qrelkit.params only (see above)
            order = [s for s in SECTION_ORDER if s in DECLARED] + [s for s in DECLARED if s not in SECTION_ORDER]
            self._data = {s: DECLARED[s] for s in order}
            self._declared = len(DECLARED)
        elif len(DECLARED) != self._declared:  # sections declared since (a registry's, as it registers)
            self._declared = len(DECLARED)
            for s in [s for s in DECLARED if s not in self._data]:
                self.declare(s, DECLARED[s])
        return self._data

    def declare(self, section: str, keys: dict[str, Key], *, merge: bool = False) -> None:
        """Declare ``[section]`` with ``keys`` after the assembly (a registry's section, see
        :func:`declare_section`): a new subsection after its parent's last one."""
        data = self._get()
        if section in data:
            data[section] = {**data[section], **keys} if merge else keys
            return
        top = section.partition(".")[0]
        items = list(data.items())
        at = max((i for i, (s, _) in enumerate(items) if s.partition(".")[0] == top), default=len(items) - 1) + 1
        items.insert(at, (section, keys))
        data.clear()
        data.update(items)

    def snapshot(self) -> dict[str, Any]:
        """The sections and keys as they are now, the components' declarations
        (:data:`qrelkit.params.DECLARED`) included (for :meth:`restore`)."""
        data = self._get()
        return {"declared": {s: dict(keys) for s, keys in DECLARED.items()},
                "schema": {s: (dict(keys), keys is DECLARED.get(s)) for s, keys in data.items()}}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """The sections and keys of a :meth:`snapshot` (a test that registered its own rules): each
        declaration as it was, in place (a component's class holds it), and the schema's sections,
        the same dict as the declaration where they were (a registry may have merged its keys into
        a copy: the density rule's into ``[stopping]``)."""
        declared = snapshot["declared"]
        for s in [s for s in DECLARED if s not in declared]:
            del DECLARED[s]
        for s, keys in declared.items():
            DECLARED.setdefault(s, {}).clear()
            DECLARED[s].update(keys)
        self._data = {s: DECLARED[s] if same else dict(keys) for s, (keys, same) in snapshot["schema"].items()}
        self._declared = len(DECLARED)

    def replace_key(self, section: str, key: Key) -> None:
        """Replace the declaration of ``[section] <key.name>`` (a registry's new choice)."""
        self._get()[section][key.name] = key

    def __getitem__(self, section: str) -> dict[str, Key]:
        return self._get()[section]

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


#: section (``stopping.knee`` for ``[stopping.knee]``) -> key name -> :class:`Key`
SCHEMA = _Schema()


def _slot(tree: dict[str, Any], section: str) -> dict[str, Any]:
    """The dict of ``section`` in a nested ``{section: {key: value}}`` tree (``a.b``: ``tree[a][b]``),
    created when missing."""
    top, _, sub = section.partition(".")
    d = tree.setdefault(top, {})
    return d.setdefault(sub, {}) if sub else d


def defaults_tree() -> dict[str, dict[str, Any]]:
    """The built-in values, ``{section: {key: default}}`` (subsections nested:
    ``tree["stopping"]["knee"]``), a fresh copy."""
    tree: dict[str, dict[str, Any]] = {}
    for sec, keys in SCHEMA.items():
        _slot(tree, sec).update({k.name: copy.deepcopy(k.default) for k in keys.values()})
    return tree


def format_value(value: Any) -> str:
    """A configuration value as a protocol file would write it (``none`` for no value).

    >>> format_value(None), format_value(True), format_value("ascending"), format_value([2, 3])
    ('none', 'true', '"ascending"', '[2, 3]')
    """
    return "none" if value is None else json.dumps(value, default=str)


def default(section: str, key: str) -> Any:
    """The declared default of ``[section] key`` (a copy)."""
    return copy.deepcopy(_declared(section)[key].default)


def defaults(section: str) -> dict[str, Any]:
    """Every declared default of a section (``stopping.knee`` for a subsection)."""
    return {k: copy.deepcopy(v.default) for k, v in _declared(section).items()}


# --------------------------------------------------------------------------- sections the registries declare
#
# A stopping rule declares its own keys (``[stopping.<rule>]``; the density rule's are in
# ``[stopping]``) and every registered rule and pool kind is a choice of ``[stopping] rule`` and
# ``[pool] kind``: the registries tell the schema as they register — qrelkit.cal.stopping this
# module (:func:`declare_section`, :func:`add_choice`), qrelkit.pooler.registry the declarations
# (:func:`qrelkit.params.add_choice` on ``[pool] kind``, :func:`qrelkit.params.declare` of a
# ``[pool.<kind>]``, which the assembled schema shares and picks up). They sit above it (the levels of
# tests/test_api_boundaries.py), so it names them and imports them the first time the whole
# schema is needed (:func:`load_plugins`: by :func:`load_config`, :func:`config_from_rows`,
# :func:`schema`), as ``qrelkit/__init__`` resolves its names; none of them imports numba. A
# plugin (a module outside qrelkit) registers the same way; a protocol file names it in
# ``[protocol] plugins``, or the environment in ``$QRELKIT_PLUGINS``.

#: qrelkit's own modules that register stopping rules and pool kinds (and so declare configuration)
REGISTRIES = ("qrelkit.cal.stopping", "qrelkit.pooler.registry", "qrelkit.pooler.adjudication")
#: environment variable: further plugin modules (importable names, comma-separated)
PLUGINS_ENV = "QRELKIT_PLUGINS"
_registries_loaded = False


def _import_plugin(name: str, where: str, file: str | None, line: int | None) -> None:
    try:
        importlib.import_module(name)  # lazy: a module named by the user (or a registry above this one)
    except InputError:
        raise
    except Exception as e:  # a module that does not import (missing, or failing as it runs) is the user's to fix
        raise InputError("bad-plugin", f"cannot import {name!r} named in {where}: {e}", file, line) from None


def load_plugins(modules: Iterable[str] = (), *, file: str | None = None, line: int | None = None) -> None:
    """Import qrelkit's registries (:data:`REGISTRIES`, once), the modules named in
    ``$QRELKIT_PLUGINS`` and ``modules`` (a protocol file's ``[protocol] plugins``, located at
    ``file``:``line``): each registers its stopping rules and pool kinds, and so their
    configuration. A module that cannot be imported is ``[bad-plugin]``."""
    global _registries_loaded
    if not _registries_loaded:
        _registries_loaded = True  # before importing: a registry that loads a configuration does not come back here
        for name in REGISTRIES:
            _import_plugin(name, "qrelkit", None, None)
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        _import_plugin(name, f"${PLUGINS_ENV}", None, None)
    for name in modules:
        _import_plugin(str(name), "[protocol] plugins", file, line)


def schema() -> dict[str, dict[str, Key]]:
    """:data:`SCHEMA` with every registered section and choice (the registries and the plugins
    of ``$QRELKIT_PLUGINS`` imported first)."""
    load_plugins()
    return SCHEMA


def _declared(section: str) -> dict[str, Key]:
    """The keys of ``section`` (the registries imported first when it is not declared yet)."""
    if section not in SCHEMA:
        load_plugins()
    return SCHEMA[section]


def declare_section(section: str, keys: Iterable[Key], *, merge: bool = False) -> None:
    """Declare ``[section]`` (``stopping.knee``) with ``keys``: a registered component's own
    parameters, checked, defaulted, listed and documented as every other key. A new subsection
    comes after its parent's last one; declaring a section again replaces its keys. ``merge``:
    add the keys to the section instead (the density rule's, in ``[stopping]``)."""
    top, _, sub = section.partition(".")
    if top not in {s.partition(".")[0] for s in SCHEMA} or (sub and sub in SCHEMA.get(top, {})):
        raise ValueError(f"cannot declare [{section}]: no section [{top}], or [{top}] has a key {sub!r}")
    SCHEMA.declare(section, _keys(*keys), merge=merge)


def add_choice(section: str, key: str, value: str) -> None:
    """Make ``value`` one of the choices of ``[section] key`` (a registry's new name: ``[pool] kind``,
    ``[stopping] rule``)."""
    k = SCHEMA[section][key]
    if value not in (k.choices or ()):
        SCHEMA.replace_key(section, replace(k, choices=(*(k.choices or ()), value)))
    if key in DECLARED.get(section, {}):  # the component's own declaration, which its class checks against
        declare_choice(section, key, value)


# --------------------------------------------------------------------------- validation

def _label(section: str, key: str) -> str:
    return f"[{section}] {key}"


def check_value(section: str, key: str, value: Any, file: str | None = None, line: int | None = None) -> Any:
    """``value`` checked against the schema of ``[section] key`` (:func:`qrelkit.params.check`),
    returned as stored (an integer given for a float key becomes a float); raises
    :class:`InputError` ``bad-type``, ``out-of-range`` or ``bad-choice``."""
    return check(SCHEMA[section][key], section, value, file, line)


_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEYLINE = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=""")


def _path(dotted: str) -> tuple[str, ...]:
    parts = re.findall(r""""[^"]*"|'[^']*'|[A-Za-z0-9_-]+""", dotted)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


def find_line(text: str, path: Iterable[str]) -> int | None:
    """The 1-based line of a table or key ``path`` (``("pool", "depth")``) in TOML ``text``: its
    ``[table]`` header, its ``key =`` line, or the first line that defines something under it."""
    want = tuple(path)
    table: tuple[str, ...] = ()
    for n, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            table = _path(m.group(1))
            if table[: len(want)] == want:
                return n
            continue
        m = _KEYLINE.match(line)
        if m:
            full = table + _path(m.group(1))
            if full[: len(want)] == want:
                return n
    return None


def _unknown(kind: str, name: str, known: Iterable[str], file: str | None, line: int | None,
             where: str = "") -> InputError:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else f"; known: {', '.join(sorted(known))}"
    return InputError("unknown-key", f"unknown {kind} {name!r}{where}{hint}", file, line)


def _subsections(section: str) -> dict[str, str]:
    """Declared subsections of a top-level section: short name -> full name."""
    return {s.partition(".")[2]: s for s in SCHEMA if s.startswith(section + ".")}


def validate(doc: Mapping[str, Any], file: str | None = None, text: str | None = None) -> dict[str, dict[str, Any]]:
    """Check a parsed TOML document against :data:`SCHEMA` (every registered section: :func:`schema`);
    returns it with values as stored."""
    top = {s.partition(".")[0] for s in schema()}

    def line_of(*path: str) -> int | None:
        return find_line(text, path) if text is not None else None

    out: dict[str, dict[str, Any]] = {}
    for sec, values in doc.items():
        if sec not in top:
            raise _unknown("section", sec, top, file, line_of(sec))
        if not isinstance(values, Mapping):
            raise InputError("bad-type", f"[{sec}] must be a table, got {what(values)}", file, line_of(sec))
        out[sec] = _validate_section(sec, values, file, line_of)
    return out


def _validate_section(sec: str, values: Mapping[str, Any], file, line_of) -> dict[str, Any]:
    keys = SCHEMA.get(sec, {})
    subs = _subsections(sec)
    res: dict[str, Any] = {}
    for key, v in values.items():
        path = (*sec.split("."), key)
        if key in subs and key not in keys:
            if not isinstance(v, Mapping):
                raise InputError("bad-type", f"[{subs[key]}] must be a table, got {what(v)}", file, line_of(*path))
            res[key] = _validate_section(subs[key], v, file, line_of)
        elif key in keys:
            res[key] = check_value(sec, key, v, file, line_of(*path))
        else:
            raise _unknown("key", key, [*keys, *subs], file, line_of(*path), where=f" in [{sec}]")
    return res


# --------------------------------------------------------------------------- the config object

DEFAULT, FILE, FLAG = "default", "file", "flag"


class Config(dict):
    """A nested dict of sections (every declared key present) with :meth:`get_value` for
    section/key look-ups and :attr:`origins` (``"section.key" -> (origin, where)``, origin one of
    ``default``, ``file``, ``flag``)."""

    source: str | None = None
    #: every value passed its key's checks — at :func:`load_config`, :meth:`set_value`,
    #: :func:`config_from_rows` — so a parameters class built from it checks none again
    #: (:meth:`qrelkit.params.Params.from_config`); change values with :meth:`set_value`
    checked = True

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.origins: dict[str, tuple[str, str | None]] = {}

    def get_value(self, section: str, key: str, override: Any = None) -> Any:
        """``override`` (a flag; checked against the schema) when it is not None, else the
        config's value, else the default."""
        declared = section in SCHEMA and key in SCHEMA[section]
        if override is not None:
            if declared:
                override = check_value(section, key, override, file="<flag>")
                self.origins[f"{section}.{key}"] = (FLAG, None)
            return override
        top, _, sub = section.partition(".")
        sec = self.get(top, {})
        sec = sec.get(sub, {}) if sub else sec  # [stopping.knee]: config["stopping"]["knee"]
        if key in sec:
            return sec[key]
        return copy.deepcopy(SCHEMA[section][key].default) if declared else None

    def set_value(self, section: str, key: str, value: Any, origin: str = FLAG, where: str | None = None) -> None:
        """Set ``[section] key`` (checked) and record where it came from."""
        if section not in SCHEMA:
            raise _unknown("section", section, SCHEMA, where, None)
        if key not in SCHEMA[section]:
            raise _unknown("key", key, SCHEMA[section], where, None, where=f" in [{section}]")
        value = check_value(section, key, value, file=where)
        if (section, key) == ("protocol", "plugins"):
            load_plugins(value, file=where)
        _slot(self, section)[key] = value
        self.origins[f"{section}.{key}"] = (origin, where)

    def effective(self) -> list[dict[str, Any]]:
        """Every declared key in schema order: section, key, value, origin, where."""
        rows = []
        for sec, keys in SCHEMA.items():
            top, _, sub = sec.partition(".")
            values = self.get(top, {})
            if sub:
                values = values.get(sub, {})
            for k in keys:
                origin, where = self.origins.get(f"{sec}.{k}", (DEFAULT, None))
                rows.append({"section": sec, "key": k, "value": values.get(k, keys[k].default), "origin": origin,
                             "where": where})
        return rows


def parse_setting(item: str) -> tuple[str, str, Any]:
    """``section.key=value`` (the value in TOML syntax, else a bare string) -> (section, key, value);
    the section may be dotted (``stopping.knee.ratio=4``)."""
    lhs, sep, raw = item.partition("=")
    parts = lhs.strip().split(".")
    if not sep or len(parts) < 2 or not all(parts):
        raise InputError("bad-option", f"--set needs SECTION.KEY=VALUE, got {item!r}", "--set")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return ".".join(parts[:-1]), parts[-1], value


def load_config(path: str | os.PathLike | None = None, overrides: Iterable[str] | Mapping[str, Any] = ()) -> Config:
    """Load a TOML protocol file, validated, merged over the defaults (``None`` = defaults only);
    then ``overrides`` (``"section.key=value"`` strings or ``{"section.key": value}``), origin flag.

    Examples
    --------
    >>> from qrelkit import InputError, load_config
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("protocol.toml", "[pool]\\ndepth = 30\\n")
    >>> config = load_config(path, overrides=["batch.first_n=50"])
    >>> config["pool"]["depth"], config.origins["batch.first_n"]
    (30, ('flag', '--set'))
    >>> try:
    ...     load_config(overrides=["pool.dpth=3"])
    ... except InputError as exc:
    ...     print(exc)
    --set: [unknown-key] unknown key 'dpth' in [pool]; did you mean 'depth'?
    """
    load_plugins()
    doc: Mapping[str, Any] | None = None
    if path is not None:
        p = Path(path)
        from qrelkit.io.text import read_text  # lazy: it loads pyarrow; `qrelkit --help` reads no file

        text = read_text(p)
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            m = re.search(r"\(at line (\d+)", str(exc))
            raise InputError("bad-toml", str(exc), file=str(p), line=int(m.group(1)) if m else None) from None
        _file_plugins(doc, str(p), text)  # before the defaults: the plugins declare theirs
    cfg = Config(defaults_tree())
    if doc is not None:
        for sec, values in validate(doc, str(p), text).items():
            _merge(cfg, sec, values, str(p), text)
        cfg.source = str(p)
    items = list(overrides.items() if isinstance(overrides, Mapping) else (
        ((s + "." + k), v) for s, k, v in map(parse_setting, overrides)))
    items.sort(key=lambda item: item[0] != "protocol.plugins")  # the plugins first: they declare keys
    for name, value in items:
        sec, _, key = name.rpartition(".")
        cfg.set_value(sec, key, value, FLAG, "--set")
    return check_rules(cfg)


def _file_plugins(doc: Mapping[str, Any], file: str, text: str) -> None:
    """Import the modules of the file's ``[protocol] plugins`` (checked first: they declare the
    sections of their rules and pool kinds, which the rest of the file may set)."""
    protocol = doc.get("protocol")
    if not isinstance(protocol, Mapping) or "plugins" not in protocol:
        return
    line = find_line(text, ("protocol", "plugins"))
    load_plugins(check_value("protocol", "plugins", protocol["plugins"], file, line), file=file, line=line)


def config_from_rows(rows: Iterable[Mapping[str, Any]], source: str | None = None) -> Config:
    """The :class:`Config` recorded as :meth:`Config.effective` rows (``section, key, value, origin,
    where``; a campaign store's ``campaign_config``): the values as they were, over the defaults
    (a key declared since is its default; a key no longer declared is left out). The rules across
    keys are not run again: the rows passed them when they were recorded."""
    rows = list(rows)
    plugins = next((r["value"] for r in rows if (r["section"], r["key"]) == ("protocol", "plugins")), None)
    load_plugins(plugins or [], file=source)  # before the defaults: the plugins declare theirs
    cfg = Config(defaults_tree())
    for r in rows:
        sec, key = str(r["section"]), str(r["key"])
        if sec in SCHEMA and key in SCHEMA[sec]:  # checked once, by today's declaration
            _slot(cfg, sec)[key] = check_value(sec, key, copy.deepcopy(r["value"]), file=source)
            if r.get("origin", DEFAULT) != DEFAULT:
                cfg.origins[f"{sec}.{key}"] = (str(r["origin"]), r.get("where"))
    cfg.source = source
    return cfg


def changed_values(old: Config, new: Config) -> list[dict[str, Any]]:
    """The keys whose effective value differs from ``old`` to ``new`` (origins aside: a comment
    or a key moved in the file changes nothing), in schema order: ``section, key, old, new,
    where`` (where the new value was set). An ``unordered`` list is compared as a set."""
    def norm(section: str, key: str, v: Any) -> str:
        if SCHEMA[section][key].unordered and isinstance(v, list):
            v = sorted(v, key=str)
        return json.dumps(v, sort_keys=True, default=str)

    before = {(r["section"], r["key"]): r["value"] for r in old.effective()}
    out = []
    for r in new.effective():
        was = before[(r["section"], r["key"])]
        if norm(r["section"], r["key"], was) != norm(r["section"], r["key"], r["value"]):
            out.append({"section": r["section"], "key": r["key"], "old": was, "new": r["value"],
                        "where": r["where"] if r["origin"] != DEFAULT else "default"})
    return out


def _merge(cfg: Config, sec: str, values: Mapping[str, Any], file: str, text: str) -> None:
    target = _slot(cfg, sec)
    for k, v in values.items():
        if f"{sec}.{k}" in SCHEMA:
            _merge(cfg, f"{sec}.{k}", v, file, text)
            continue
        target[k] = v
        line = find_line(text, (*sec.split("."), k))
        cfg.origins[f"{sec}.{k}"] = (FILE, f"{file}:{line}" if line else file)


# --------------------------------------------------------------------------- rules across keys
#
# Each key passes its own checks (type, range, choices) as it is read; a rule across keys checks
# values that only contradict each other. A rule is a small function of the whole configuration,
# registered under the section it belongs to (:func:`cross_rule`): it returns a :class:`Conflict`
# (the keys involved, what is wrong, how to fix it) or None. :func:`load_config` runs every rule
# once the file and the flags are applied; the first conflict is ``[its rule name]``, exit 2.
# Rules are conservative: only values that certainly contradict each other, or that a command
# would silently not honour.


@dataclass(frozen=True)
class Conflict:
    """A contradiction between configuration values: ``keys`` ((section, key), ...; the first one
    set in the file locates the error), ``problem`` (what is wrong) and ``fix`` (how to fix it)."""

    keys: tuple[tuple[str, str], ...]
    problem: str
    fix: str


CrossRule = Any  # Callable[[Config], Conflict | None]

#: section -> rule name -> rule function: every rule across keys, in the order they are checked
CROSS_RULES: dict[str, dict[str, CrossRule]] = {}

#: campaign stages that always run (``[campaign] skip`` cannot leave them out)
CAMPAIGN_REQUIRED = ("validate", "select", "pool", "qrels")


def cross_rule(section: str, name: str):
    """Register the decorated function as rule ``name`` (also its error's rule) of ``section``: a
    function of a :class:`Config` returning a :class:`Conflict` or None. A later component adds a
    rule the same way, in its own module."""
    if section.partition(".")[0] not in {s.partition(".")[0] for s in SCHEMA}:
        raise ValueError(f"no configuration section {section!r}")

    def register(func):
        CROSS_RULES.setdefault(section, {})[name] = func
        return func

    return register


def origin_of(cfg: Config, section: str, key: str) -> str:
    """Where ``[section] key`` was set: ``FILE:LINE``, ``--set``, or ``default``."""
    origin, where = cfg.origins.get(f"{section}.{key}", (DEFAULT, None))
    return "default" if origin == DEFAULT else (where or origin)


def _conflict_error(name: str, cfg: Config, c: Conflict, others: int) -> InputError:
    """The one-line error of rule ``name``: every key with its value and origin, the problem, the fix."""
    shown = ", ".join(f"{_label(s, k)} = {format_value(cfg.get_value(s, k))} ({origin_of(cfg, s, k)})"
                      for s, k in c.keys)
    more = f" ({others} other rule{'s' if others > 1 else ''} across keys {'are' if others > 1 else 'is'} broken too)" \
        if others else ""
    file, line = cfg.source, None
    origins = [cfg.origins.get(f"{s}.{k}", (DEFAULT, None)) for s, k in c.keys]
    located = [where for origin, where in origins if origin == FILE and where]
    if located:
        m = re.fullmatch(r"(.*):(\d+)", located[0])
        file, line = (m.group(1), int(m.group(2))) if m else (located[0], None)
    elif any(origin == FLAG for origin, _ in origins):
        file = "--set"
    return InputError(name, f"{shown}: {c.problem}; {c.fix}{more}", file, line)


def broken_rules(cfg: Config) -> list[tuple[str, Conflict]]:
    """Every rule across keys ``cfg`` breaks: (rule name, :class:`Conflict`), in checking order."""
    out = []
    for rules in CROSS_RULES.values():
        for name, rule in rules.items():
            c = rule(cfg)
            if c is not None:
                out.append((name, c))
    return out


def check_rules(cfg: Config) -> Config:
    """``cfg`` when it breaks no rule across keys; else the first broken rule's :class:`InputError`
    (one line: the keys with their values and where each was set, the problem and its fix)."""
    broken = broken_rules(cfg)
    if broken:
        name, c = broken[0]
        raise _conflict_error(name, cfg, c, len(broken) - 1)
    return cfg


def assessor_file_name(name: str) -> str:
    """The name an assessor's (or a batch's) files and folders get: every character other than a
    letter, a digit, ``-``, ``_`` or ``.`` becomes ``_`` (``"a b"`` -> ``"a_b"``)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _v(cfg: Config, section: str, key: str) -> Any:
    return cfg.get_value(section, key)


def _grades(values: Iterable[Any]) -> list[int]:
    return sorted({int(g) for g in values})


# -- [campaign] ---------------------------------------------------------------------------------


@cross_rule("campaign", "assessors-empty")
def _assessors_empty(cfg: Config) -> Conflict | None:
    """``[campaign] assessors`` is empty: no one would judge."""
    if list(_v(cfg, "campaign", "assessors")):
        return None
    return Conflict((("campaign", "assessors"), ("batch", "assessors_per_item")), "no assessor is named to judge",
                    "name at least [batch] assessors_per_item assessors in [campaign] assessors")


@cross_rule("campaign", "assessor-names-collide")
def _assessor_names(cfg: Config) -> Conflict | None:
    """Two assessors of ``[campaign] assessors`` that one would take for the other: the same name
    twice, names equal ignoring case (one folder on a case-insensitive file system), names with the
    same batch folder (``"a b"`` and ``"a_b"``: ``batches/a_b/``), an empty name, or ``.``/``..``."""
    names: set[str] = set()
    seen: dict[str, str] = {}  # casefolded folder name -> the assessor who has it
    for name in map(str, _v(cfg, "campaign", "assessors")):
        folder = assessor_file_name(name)
        if not name.strip():
            problem = f"an assessor name is empty ({name!r})"
        elif folder in (".", ".."):
            problem = f"{name!r} is not a folder name (batches/{folder}/)"
        elif name in names:
            problem = f"{name!r} is named twice"
        elif folder.casefold() in seen:
            other = seen[folder.casefold()]
            why = "ignoring case" if other.casefold() == name.casefold() else "on the file system"
            problem = f"{other!r} and {name!r} are one assessor {why}: both judge in batches/{folder}/"
        else:
            seen[folder.casefold()] = name
            names.add(name)
            continue
        return Conflict((("campaign", "assessors"),), problem,
                        "give every assessor a distinct name of letters, digits, '-', '_' or '.' (case aside)")
    return None


@cross_rule("campaign", "skip-required-stage")
def _skip_required(cfg: Config) -> Conflict | None:
    """``[campaign] skip`` names a stage that always runs (validate, select, pool, qrels)."""
    bad = [s for s in _v(cfg, "campaign", "skip") if s in CAMPAIGN_REQUIRED]
    if not bad:
        return None
    return Conflict((("campaign", "skip"),), f"{', '.join(bad)} always run{'s' if len(bad) == 1 else ''} "
                    f"({', '.join(CAMPAIGN_REQUIRED)} cannot be skipped)", f"remove {', '.join(bad)} from skip")


@cross_rule("campaign", "vote-vs-passage-relevant")
def _vote_vs_relevant(cfg: Config) -> Conflict | None:
    """``[campaign] combine = "vote"`` decides relevance by the vote (grades >= ``[labels]
    vote_threshold``), so ``[labels] passage_relevant`` must be exactly the scale's grades at or
    above the threshold."""
    if _v(cfg, "campaign", "combine") != "vote":
        return None
    t = int(_v(cfg, "labels", "vote_threshold"))
    want = [g for g in _grades(_v(cfg, "labels", "scale")) if g >= t]
    have = _grades(_v(cfg, "labels", "passage_relevant"))
    if want == have:
        return None
    return Conflict((("campaign", "combine"), ("labels", "vote_threshold"), ("labels", "passage_relevant")),
                    f"the vote makes grades {want} relevant, [labels] passage_relevant says {have}",
                    "make them agree (passage_relevant = the scale's grades >= vote_threshold)")


# -- [batch] ------------------------------------------------------------------------------------


@cross_rule("batch", "assessors-too-few")
def _assessors_too_few(cfg: Config) -> Conflict | None:
    """``[batch] assessors_per_item`` above the number of ``[campaign] assessors``: an item cannot
    get that many distinct assessors."""
    k, names = int(_v(cfg, "batch", "assessors_per_item")), list(_v(cfg, "campaign", "assessors"))
    if not names or k <= len(names):
        return None
    return Conflict((("batch", "assessors_per_item"), ("campaign", "assessors")),
                    f"{k} distinct assessors per item, but only {len(names)} named",
                    f"name at least {k} assessors, or lower assessors_per_item")


# -- [labels] -----------------------------------------------------------------------------------


@cross_rule("labels", "grade-outside-scale")
def _grades_in_scale(cfg: Config) -> Conflict | None:
    """A grade of ``[labels] passage_relevant``, ``document_relevant``, a ``[labels.schemes]``
    scheme or ``grade_map`` (either side) that is not on ``[labels] scale``: no assessor can give it."""
    scale = set(_grades(_v(cfg, "labels", "scale")))
    lists = [("passage_relevant", _v(cfg, "labels", "passage_relevant")),
             ("document_relevant", _v(cfg, "labels", "document_relevant"))]
    lists += [(f"schemes {n}", g) for n, g in (_v(cfg, "labels", "schemes") or {}).items()]
    gm = _v(cfg, "labels", "grade_map") or {}
    lists.append(("grade_map", [*gm.keys(), *gm.values()]))
    for what, grades in lists:
        off = [g for g in _grades(grades) if g not in scale]
        if off:
            key = what.partition(" ")[0]
            return Conflict((("labels", key), ("labels", "scale")),
                            f"{what} uses grade{'s' if len(off) > 1 else ''} {off}, not on the scale",
                            f"use grades of the scale in {what}, or add them to the scale")
    return None


@cross_rule("labels", "vote-threshold-outside-scale")
def _vote_threshold(cfg: Config) -> Conflict | None:
    """``[labels] vote_threshold`` above every grade of the scale (no vote is ever relevant) or at
    or below the lowest (every vote is)."""
    t, scale = int(_v(cfg, "labels", "vote_threshold")), _grades(_v(cfg, "labels", "scale"))
    if not scale or scale[0] < t <= scale[-1]:
        return None
    what = "no vote can ever be relevant" if t > scale[-1] else "every vote is relevant"
    return Conflict((("labels", "vote_threshold"), ("labels", "scale")), what,
                    f"set vote_threshold above {scale[0]} and at most {scale[-1]}")


@cross_rule("labels", "scheme-shadows-level")
def _scheme_shadows(cfg: Config) -> Conflict | None:
    """A ``[labels.schemes]`` scheme named ``passage`` or ``document``: those schemes are ``[labels]
    passage_relevant`` and ``document_relevant``; the entry would be ignored."""
    for level in ("passage", "document"):
        if level in (_v(cfg, "labels", "schemes") or {}):
            return Conflict((("labels", "schemes"), ("labels", f"{level}_relevant")),
                            f"[labels.schemes] {level} would be ignored: the {level} scheme is [labels] "
                            f"{level}_relevant", f"set {level}_relevant instead, or give the scheme another name")
    return None


# -- [top1], [eval] -----------------------------------------------------------------------------


def _level_above_scale(cfg: Config, section: str, key: str, consequence: str) -> Conflict | None:
    """A grade level ``[section] key`` above every grade of ``[labels] scale`` (None when it is not,
    or is not a level)."""
    level, scale = _v(cfg, section, key), _grades(_v(cfg, "labels", "scale"))
    if not (isinstance(level, int) and not isinstance(level, bool)) or not scale or level <= scale[-1]:
        return None
    return Conflict(((section, key), ("labels", "scale")), f"no grade of the scale reaches it: {consequence}",
                    f"set {key} to at most {scale[-1]}")


@cross_rule("top1", "perfect-min-rel-outside-scale")
def _perfect_min_rel(cfg: Config) -> Conflict | None:
    """``[top1] perfect_min_rel`` above every grade of ``[labels] scale``: no qrel joins the perfect run."""
    return _level_above_scale(cfg, "top1", "perfect_min_rel", "the perfect run would be empty")


@cross_rule("eval", "relevant-level-outside-scale")
def _relevant_level(cfg: Config) -> Conflict | None:
    """``[eval] relevant`` given as a level above every grade of ``[labels] scale``: binary
    measures would find nothing relevant."""
    return _level_above_scale(cfg, "eval", "relevant", "binary measures would find nothing relevant")


# -- [cal] --------------------------------------------------------------------------------


@cross_rule("cal", "official-thread-not-run")
def _official_thread(cfg: Config) -> Conflict | None:
    """``[cal] official_thread`` not among ``[cal] threads``: its judgments would not exist (the
    campaign would decide its topics by another thread)."""
    off, threads = _v(cfg, "cal", "official_thread"), list(_v(cfg, "cal", "threads"))
    if off in threads:
        return None
    return Conflict((("cal", "official_thread"), ("cal", "threads")), f"thread {off!r} does not run",
                    f"add {off!r} to threads, or make official_thread one of {threads or 'the threads'}")


# -- [selection], [runs], [pool] ----------------------------------------------------------------


@cross_rule("selection", "include-and-exclude")
def _include_exclude(cfg: Config) -> Conflict | None:
    """A run in both ``[selection] include`` and ``exclude`` (exclusion would win, silently)."""
    both = sorted(set(_v(cfg, "selection", "include")) & set(_v(cfg, "selection", "exclude")))
    if not both:
        return None
    return Conflict((("selection", "include"), ("selection", "exclude")),
                    f"{', '.join(both)} would be always and never pooled", "name each run in one of them only")


@cross_rule("selection", "nothing-pooled")
def _nothing_pooled(cfg: Config) -> Conflict | None:
    """No run could feed the pool: no baselines, ``per_group = 0`` and nothing included."""
    if _v(cfg, "selection", "include_baselines") or int(_v(cfg, "selection", "per_group")) or \
            list(_v(cfg, "selection", "include")):
        return None
    return Conflict((("selection", "include_baselines"), ("selection", "per_group"), ("selection", "include")),
                    "no run would feed the pool", "raise per_group, include the baselines, or include runs")


@cross_rule("runs", "expected-deeper-than-max")
def _expected_depth(cfg: Config) -> Conflict | None:
    """``[runs] expected_depth`` above ``max_depth``: every topic of every valid run is reported shallow."""
    exp, mx = _v(cfg, "runs", "expected_depth"), _v(cfg, "runs", "max_depth")
    if exp is None or mx is None or exp <= mx:
        return None
    return Conflict((("runs", "expected_depth"), ("runs", "max_depth")),
                    "no valid run can be as deep as expected: every topic would be reported shallow",
                    "set expected_depth to at most max_depth")


@cross_rule("pool", "pool-deeper-than-runs")
def _pool_depth(cfg: Config) -> Conflict | None:
    """``[pool] depth`` above ``[runs] max_depth``: no valid run is that deep (the pool would be
    cut at max_depth, silently)."""
    depth, mx = int(_v(cfg, "pool", "depth")), _v(cfg, "runs", "max_depth")
    if mx is None or depth <= mx:
        return None
    return Conflict((("pool", "depth"), ("runs", "max_depth")), "the pool cannot be deeper than the runs",
                    "lower the pool depth, or raise max_depth")


# -- [adjudicate] -------------------------------------------------------------------------------


@cross_rule("adjudicate", "budget-without-strategy")
def _budget_without_strategy(cfg: Config) -> Conflict | None:
    """``[adjudicate] budget`` set while ``strategy = "none"``: the whole pool is judged, in pool
    order; the budget would not be honoured."""
    if _v(cfg, "adjudicate", "strategy") != "none" or not int(_v(cfg, "adjudicate", "budget")):
        return None
    return Conflict((("adjudicate", "budget"), ("adjudicate", "strategy")),
                    "a budget needs an adjudication strategy: with none the whole pool is judged, in pool order",
                    'name a strategy (e.g. strategy = "mm-ns"), or set budget = 0')


@cross_rule("adjudicate", "strategy-without-pool-rest")
def _strategy_without_pool_rest(cfg: Config) -> Conflict | None:
    """``[adjudicate] strategy`` set while ``[campaign] skip`` leaves out pool-rest, the stage that
    judges in the strategy's order: the strategy would not be honoured."""
    if _v(cfg, "adjudicate", "strategy") == "none" or "pool-rest" not in list(_v(cfg, "campaign", "skip")):
        return None
    return Conflict((("adjudicate", "strategy"), ("campaign", "skip")),
                    "the adjudication order is the pool-rest stage's, which skip leaves out",
                    'remove pool-rest from skip, or set strategy = "none"')


# -- [dedupe] -----------------------------------------------------------------------------------


@cross_rule("dedupe", "lsh-bands-exceed-permutations")
def _lsh_bands(cfg: Config) -> Conflict | None:
    """``[dedupe] bands`` x ``rows`` above ``num_perm``: the LSH bands need more MinHash values
    than there are (the dedupe stage would fail after init)."""
    b, r, n = (int(_v(cfg, "dedupe", k)) for k in ("bands", "rows", "num_perm"))
    if b * r <= n:
        return None
    return Conflict((("dedupe", "bands"), ("dedupe", "rows"), ("dedupe", "num_perm")),
                    f"bands x rows = {b * r} MinHash values, but only {n} permutations",
                    "make bands x rows at most num_perm")
