"""DAPO reinforcement learning of the manager in :class:`envs.ManagerEnv`.

- :mod:`training.rl.rollout`: one rollout = one manager activation played by the model inside a replay-pool episode,
  token-exact (``EpisodeTokens``, ``Rollout``, ``EpisodePlayer``, start points);
- :mod:`training.rl.engines`: generation (transformers on CPU, vLLM server/colocate on GPUs), the weight-sync check;
- :mod:`training.rl.sampling`: the resumable start-point sampler and DAPO's dynamic sampling;
- :mod:`training.rl.trainer`: ``run_rl`` on TRL's ``GRPOTrainer`` (``loss_type: dapo``).

The DAPO math (token-level clipped loss, overlong shaping, uniform groups) is in :mod:`training.dapo`.
"""
