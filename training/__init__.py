"""training: the models the manager is trained from, SFT and DAPO on them, and the pipeline that runs it all.

The tokenizer and chat template they train with live in the harness (``harness.tokenizer``,
``harness/chat_template.jinja``): the wire format, the synthesis and the training all use them.

- ``training.models``: ``build_tiny_qwen3(out_dir, seed=...)``, the tiny random Qwen3 every CPU config trains.
- ``training.smollm2``: SmolLM2-135M-Instruct converted to a transformers checkpoint (a real model that trains on CPU).
- ``training.cli``: ``stateguard model tiny|smollm2 --out DIR``, building the two models above.
- ``training.sft``: ``run_sft``, TRL ``SFTTrainer`` on the synthesized dataset with assistant-only loss; over-length
  samples are dropped and counted, never truncated (``scripts/sft.py``, ``configs/sft/``, ``configs/accelerate/``).
- ``training.lm_head``: a compact LM head for CPU training that scores only the labelled positions.
- ``training.rl``: DAPO on TRL's ``GRPOTrainer`` in the manager env (``scripts/rl.py``, ``configs/rl/``).
- ``training.pipeline``: ``stateguard pipeline --config configs/pipeline/<name>.yaml``, model to evaluation in one job.
- ``training.pipeline_guard``: what the pipeline checks before its first stage (paths, stage markers, fingerprints).
- ``training.estimate``: memory and time expectations of the full-scale runs, arithmetic shown.
- ``training.study``: the small-model study, a client of the library (``python -m training.study``); nothing else
  imports it.

Nothing here downloads anything (unless a config names a hub model id). Importing this package is cheap: torch and
transformers load inside the functions that need them.
"""
