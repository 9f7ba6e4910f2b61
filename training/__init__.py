"""training: the models the manager is trained from, SFT on them, and DAPO.

The tokenizer and chat template they train with live in the harness (``harness.tokenizer``,
``harness/chat_template.jinja``): the wire format, the synthesis and the training all use them.

- ``training.models``: ``build_tiny_qwen3(out_dir, seed=...)``, the tiny random Qwen3ForCausalLM that every CPU
  config trains (``stateguard model tiny --out DIR``, see ``training.cli``).
- ``training.sft``: ``run_sft(model_args, data_args, sft_config)``, TRL ``SFTTrainer`` on the synthesized dataset
  with assistant-only loss; over-length samples are dropped and counted, never truncated (``scripts/sft.py``,
  ``configs/sft/``, ``configs/accelerate/``).

Nothing here downloads anything (unless an SFT config names a hub model id). Importing this package is cheap:
torch and transformers load inside the functions that need them.
"""
