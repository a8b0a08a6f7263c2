"""Documentation that must match the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_command_reference_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_commands_doc.py"), "--check"], cwd=ROOT)
    assert r.returncode == 0, "docs/commands.md is stale: run python scripts/gen_commands_doc.py"


def test_config_holds_every_protocol_threshold():
    import tomllib

    cfg = tomllib.loads((ROOT / "configs" / "trec-dl-2022.toml").read_text())
    assert cfg["selection"]["per_group"] == 3 and cfg["selection"]["include_baselines"] is True
    assert cfg["pool"]["depth"] == 10
    assert cfg["screen"]["first_n"] == 100 and cfg["screen"]["discard_if_relevant_share_at_least"] == 0.5
    assert cfg["fractional"]["fraction"] == 0.1
    assert cfg["cal"]["batch_size"] == 25 and cfg["cal"]["fractional_batch_size_later"] == 50
    s = cfg["stopping"]
    assert (s["accept_density_below"], s["accept_min_judged"], s["accept_min_relevant"]) == (0.4, 150, 4)
    assert (s["reject_min_judged"], s["reject_density_above"]) == (301, 0.5)
    assert (s["budget_min_judged"], s["budget_min_relevant"], s["budget_density_at_least"]) == (150, 4, 0.4)
    assert cfg["labels"]["passage_relevant"] == [2, 3] and cfg["labels"]["document_relevant"] == [1, 2, 3]
    assert cfg["reuse"]["density_threshold"] == 0.4
