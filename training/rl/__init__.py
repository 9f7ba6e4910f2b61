"""DAPO reinforcement learning of the manager in :class:`envs.ManagerEnv` (``scripts/rl.py``, ``configs/rl/``).

- :mod:`training.rl.trainer`: ``run_rl`` and ``RLArguments``: TRL's ``GRPOTrainer`` with ``loss_type: dapo`` fed by
  ``ManagerRollouts``, its ``rollout_func`` (dynamic sampling over replay-pool start points).
- :mod:`training.rl.dapo`: where the DAPO loss runs (TRL's ``GRPOTrainer._compute_loss``), overlong shaping,
  uniform groups.
- :mod:`training.rl.dapo_trainer`: ``DapoTrainer`` (rollout state in checkpoints, loss-preserving savings) and the
  reward functions.
- :mod:`training.rl.rollout`: one rollout = one manager activation played by the model inside a replay-pool episode,
  token-exact (``EpisodeTokens``, ``Rollout``, ``EpisodePlayer``, start points).
- :mod:`training.rl.sampling`: the resumable start-point sampler and DAPO's dynamic sampling.
- :mod:`training.rl.engines`: generation with transformers (CPU), the policy's log-probabilities.
- :mod:`training.rl.vllm_engine`: generation with vLLM (server or colocate, GPUs), the weight-sync check.
- :mod:`training.rl.waves`: the wave driver: every rollout of a round open at once, each wave's pending responses
  sampled with one ``generate_many`` call (``drive`` in :mod:`training.rl.rollout` is the one-at-a-time reference).
- :mod:`training.rl.workers`: the manager envs in Ray actors (``executor: ray``).
- :mod:`training.rl.metrics`: the ``dapo/*`` and ``manager/*`` metrics logged each step.
- :mod:`training.rl.rollout_groups`: ``rollout_groups.jsonl``, every group played, and its summary table.
- :mod:`training.rl.model_card`: the run's ``README.md`` model card.
- :mod:`training.rl.temperature`: the sampling temperature chosen on the training pool (``temperature_grid``).
"""
