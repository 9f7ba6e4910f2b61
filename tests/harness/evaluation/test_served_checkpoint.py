"""``stateguard evaluate --manager hier:llm-hf:CKPT`` serves the checkpoint as its manager.json says, and the record
says so: every episode's ``config["manager_settings"]`` and the variant's ``manager_settings`` in results.json name
the file and the settings used (an explicit ``manager_max_tokens`` on top); a changed file is not resumed."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.evaluation.evaluate import RESULTS_FILE, EvaluationConfig, run_evaluation, variant_file
from harness.manager.checkpoint_settings import MANAGER_FILE, ManagerSettings, write_manager_settings
from harness.manager.episode import read_episodes
from harness.manager.hier_prompts import CHECKS_SYSTEM
from tests.harness.test_grammar import needs_grammar
from tests.harness.test_llm import build_tiny_chat_model

ISOLATION = "bwrap" if shutil.which("bwrap") else "none"


@needs_grammar
@pytest.mark.timeout(600)
def test_results_record_the_checkpoint_settings_each_variant_was_served_with(two_turn_task, tmp_path):
    model = build_tiny_chat_model(tmp_path / "ckpt", [CHECKS_SYSTEM, '{"checks": []}'])
    write_manager_settings(model, ManagerSettings(policy="hier", writes="checks", prompt_view="bare"))
    spec = f"hier:llm-hf:{model}"
    config = EvaluationConfig(
        suite=str(two_turn_task), out=str(tmp_path / "eval"), managers=["none", spec], isolation=ISOLATION,
        manager_max_tokens=12, n_resamples=200, report=False,
    )  # fmt: skip
    results = run_evaluation(config)
    used = {
        "file": str(model / MANAGER_FILE), "writes": "checks", "prompt_view": "bare", "constrained_decoding": True,
        "legal_actions_only": False, "max_new_tokens": 12, "temperature": 0.0,
    }  # fmt: skip
    assert (
        results["variants"][spec]["manager_settings"] == used
        and results["variants"]["none"]["manager_settings"] is None
    )
    saved = json.loads((tmp_path / "eval" / RESULTS_FILE).read_text())
    assert saved["variants"][spec]["manager_settings"] == used
    [record] = read_episodes(variant_file(tmp_path / "eval", spec))
    assert record.config["manager"] == "hier-checks-llm-hf" and record.config["manager_settings"] == used
    assert record.config["eval"]["constrained_decoding"] is True
    assert record.error is None and any(a["actor"] == "policy" for a in record.activations)  # tier 1 wrote checks
    write_manager_settings(model, ManagerSettings(policy="hier", writes="checks"))  # served otherwise now
    with pytest.raises(ValueError, match="holds episodes of another run: the runtime changed"):
        run_evaluation(config)  # not resumed as the same evaluation
