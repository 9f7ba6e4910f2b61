"""The check language: typed, JSON-serializable check specs (:mod:`.spec`), their compilation to a verdict computed
in the clean verifier (:mod:`.compile`) and their requirement in words (:mod:`.requirements`)."""

from harness.checks.compile import compile_check, requirement
from harness.checks.spec import CHECK_KINDS, CheckSpec, CheckSpecError, parse_spec, spec_schema

__all__ = ["CHECK_KINDS", "CheckSpec", "CheckSpecError", "compile_check", "parse_spec", "requirement", "spec_schema"]
