"""The small-model study: SmolLM2-135M-Instruct as the manager, before and after SFT (and DAPO).

A client of the library, not part of it: nothing in ``harness``, ``rewards``, ``synthesis``, ``envs`` or the rest of
``training`` imports this package (``tests/test_layers.py``). It reaches the core through generic hooks only
(``HFChatBackend.logits_processors``, ``LLMPolicy.before_reply``, a TRL trainer subclass of its own).

    python -m training.study --config training/study/configs/smollm2-mini.yaml   # the ~2-minute miniature

Modules:

- :mod:`.driver`: :class:`~.driver.StudyConfig` and :func:`~.driver.run_study`, the stages in order;
- :mod:`.cli`: the command line (``python -m training.study``);
- :mod:`.data`: the synthesized training and held-out data, in the study's prompt view;
- :mod:`.arms`: the arms (models and policies) and how each is built and served;
- :mod:`.decisions`, :mod:`.exact_match`: the decision points and the exact-match samples, scored per arm;
- :mod:`.margin`, :mod:`.margin_cli`, :mod:`.branch_bias`: teacher-forced decision margins and the serving-time
  decision bias chosen on them;
- :mod:`.action_weight`, :mod:`.sft`: the SFT trainer that weighs the tokens naming each action, and its launch
  entry point (``accelerate launch -m training.study.sft``);
- :mod:`.decoding`: the study's decoding rule (no decision before a probe ran), set on ``LLMPolicy.before_reply``;
- :mod:`.layout`: :class:`~.layout.Study`, where each stage's files live;
- :mod:`.metrics`, :mod:`.report`, :mod:`.render`, :mod:`.plots`: the numbers, the report and the figures.
"""
