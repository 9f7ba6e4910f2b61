"""The named evaluation suites (``stateguard evaluate --suite NAME``): what each one is and where its tasks come from.

A synthesized suite is the output of ``stateguard synthesize --config configs/synthesis/<config> --out CACHE/NAME``
(:attr:`SuiteSpec.synthesis_config`); evaluation only reads it (:func:`harness.evaluation.suite.resolve_suite` names
the command when the folder is missing), and the pipeline (:mod:`training.pipeline`) writes it before its evaluation.
An imported suite is a benchmark folder that :func:`~harness.evaluation.suite.resolve_suite` imports into
``CACHE/NAME`` on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DABENCH_DEV = ROOT.parent / "shared" / "benchmarks" / "dabench-dev"
DEFAULT_CACHE = Path("runs") / "eval-suites"


@dataclass(frozen=True)
class SuiteSpec:
    """A named suite: where its task folders come from."""

    description: str
    synthesis_config: str | None = field(
        default=None,
        metadata={
            "help": "A synthesized suite: its SynthesisConfig YAML, relative to the repository root; the suite is "
            "the output of stateguard synthesize with it."
        },
    )
    import_from: Path | None = field(default=None, metadata={"help": "Benchmark folder to import."})
    importer: str = field(default="dabench", metadata={"help": "Importer of import_from (stateguard tasks import)."})

    def synthesize_command(self, out: Path) -> str:
        """The command that writes this synthesized suite into ``out``."""
        return f"stateguard synthesize --config {self.synthesis_config} --out {out}"


SUITES: dict[str, SuiteSpec] = {
    "heldout-seeds": SuiteSpec(
        "synthesized, every training domain, held-out seeds 1000+",
        synthesis_config="configs/synthesis/heldout-seeds.yaml",
    ),
    "heldout-domain": SuiteSpec(
        "synthesized, the held-out domain logistics only, seeds 2000+",
        synthesis_config="configs/synthesis/heldout-domain.yaml",
    ),
    "heldout-writer-b": SuiteSpec(
        "synthesized, the tasks of heldout-seeds worded by question writer b (same requirements, other words)",
        synthesis_config="configs/synthesis/heldout-writer-b.yaml",
    ),
    "smoke": SuiteSpec(
        "synthesized, one commerce task of 6 turns (seed 1000), at most 4 faults",
        synthesis_config="configs/synthesis/smoke-suite.yaml",
    ),
    "heldout-demo": SuiteSpec(
        "synthesized, the finance task of heldout-seeds with seed 1000 and its faults (make demo)",
        synthesis_config="configs/synthesis/heldout-demo.yaml",
    ),
    "dabench-dev": SuiteSpec("InfiAgent-DABench dev questions (model workers only)", import_from=DABENCH_DEV),
}
"""Suite name -> where its tasks come from."""
