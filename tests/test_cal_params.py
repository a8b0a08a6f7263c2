"""The CAL room owns its parameters (issue 20): ``[screen]`` and ``[cal]`` are declared in
``qrelkit.cal.params`` beside the classes the room's components take; each default is written
once (the declaration), each value checked once (against its key)."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from qrelkit.config import DECLARATION_MODULES, SCHEMA, load_config
from qrelkit.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


def test_screen_and_cal_are_declared_beside_their_classes():
    from qrelkit.cal import params

    assert "qrelkit.cal.params" in DECLARATION_MODULES
    assert SCHEMA["cal"] == params.KEYS and SCHEMA["screen"] == params.SCREEN_KEYS
    owned = {k for cls in (params.CalParams, params.ThreadParams, params.FeatureParams) for k in cls.KEYS}
    assert owned == set(params.KEYS)  # every [cal] key has its class, none two
    assert sum(len(cls.KEYS) for cls in (params.CalParams, params.ThreadParams, params.FeatureParams)) == len(owned)


def test_public_names_keep_working():
    import qrelkit.cal
    from qrelkit.cal import loop, params, screening

    assert loop.CalParams is params.CalParams is qrelkit.cal.CalParams
    assert loop.THREADS == params.THREADS == ("fractional", "local", "all") and loop.SCHEDULES == ("fixed", "bmi")
    assert issubclass(screening.ScreeningRule, params.ScreenParams)
    assert screening.ScreeningRule.from_config({"screen": {"first_n": 7}}).decide(7, 7, 0) == "discard-none"


def test_importing_the_declarations_loads_no_machinery():
    code = ("import sys, qrelkit.cal.params, qrelkit.cal; "
            "print(sorted(m for m in ('numba', 'pandas', 'sklearn', 'qrelkit.cal.stopping') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["[]"]


def test_a_flag_is_checked_once_against_its_key():
    from qrelkit.cal.params import CalParams, FeatureParams, ThreadParams

    cfg = load_config(None)
    with pytest.raises(InputError, match=r"<flag>: \[out-of-range\] \[cal\] batch_size must be >= 1"):
        CalParams.from_config(cfg, batch_size=0)
    with pytest.raises(InputError, match=r"<flag>: \[bad-choice\] \[cal\] schedule"):
        CalParams.from_config(cfg, schedule="growing")
    with pytest.raises(InputError, match=r"\[out-of-range\] \[cal\] hashing"):
        FeatureParams.from_config(cfg, hashing=0)
    with pytest.raises(InputError, match=r"<flag>: \[bad-choice\] \[cal\] threads"):
        ThreadParams.from_config(cfg, threads="all,bogus")
    assert ThreadParams.from_config(cfg, threads="local, all").threads == ["local", "all"]
    p = CalParams.from_config(cfg, class_weight="none", batch_size=10)
    assert (p.class_weight, p.batch_size, p.relevant) == (None, 10, (2, 3))
    assert p.as_dict()["class_weight"] is None and p.as_dict()["relevant"] == [2, 3]


def test_the_library_checks_with_the_declaration():
    from qrelkit.cal.features import build_features
    from qrelkit.cal.screening import ScreeningRule

    with pytest.raises(InputError, match=r"\[out-of-range\] \[cal\] hashing"):
        build_features([], hashing=0)
    with pytest.raises(InputError, match=r"\[out-of-range\] \[screen\] first_n"):
        ScreeningRule(first_n=0)


def test_help_texts_take_their_defaults_from_the_declaration():
    src = (ROOT / "qrelkit" / "cli" / "cal.py").read_text()
    assert not re.findall(r"config \[cal\] \w+, [0-9]", src)  # no default written a second time
    from typer.testing import CliRunner

    from qrelkit.cli import app

    out = CliRunner().invoke(app, ["cal", "next", "--help"], env={"COLUMNS": "300"}).output
    assert f"[cal] batch_size, {SCHEMA['cal']['batch_size'].default})" in out


def test_library_defaults_come_from_the_declarations():
    from qrelkit.cal.loop import fit_weights
    from qrelkit.cal.stopping import JudgingState, state_from_store, thread_states

    assert inspect.signature(fit_weights).parameters["C"].default == SCHEMA["cal"]["C"].default
    rel = tuple(SCHEMA["labels"]["passage_relevant"].default)
    assert inspect.signature(state_from_store).parameters["relevant"].default == rel
    assert inspect.signature(thread_states).parameters["relevant"].default == rel
    assert inspect.signature(JudgingState.from_grades).parameters["relevant_grades"].default == rel


def test_the_campaign_budget_and_threads_come_from_the_config(tmp_path):
    from qrelkit.cal.stopping import _config_budget

    (tmp_path / "p.toml").write_text("[cal]\nbudget = 40\nthreads = [\"local\", \"all\"]\n")
    cfg = load_config(tmp_path / "p.toml")
    assert _config_budget(cfg, None) == 40 and _config_budget(cfg, 7) == 7 and _config_budget(None, None) is None
    from qrelkit.campaign.settings import official_thread

    assert official_thread(cfg) == "all"
