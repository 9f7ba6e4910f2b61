"""The small-model study: SmolLM2-135M-Instruct writing the checks a turn requires (prompt only, SFT, SFT+DAPO)
against the baselines that could explain the result, in whole held-out episodes.

A client of the library, not part of it: nothing in ``harness``, ``rewards``, ``synthesis``, ``envs`` or the rest of
``training`` imports this package (``tests/test_layers.py``). It reaches the core through the product's own commands
(``stateguard evaluate``, ``scripts/sft.py``, ``scripts/rl.py``) and their files.

    python -m training.study --config training/study/configs/smollm2-mini.yaml   # the miniature

Modules:

- :mod:`.config`: :class:`~.config.StudyConfig`, the design declared before the test set is drawn;
- :mod:`.driver`: :func:`~.driver.run_study`, the stages in order, and the ``stateguard evaluate`` command per arm;
- :mod:`.cli`: the command line (``python -m training.study``);
- :mod:`.data`: the synthesized training and test splits, and the SFT data in the study's prompt view;
- :mod:`.testset`: the frozen test set (drawn once, its ids and hashes committed, checked on every run);
- :mod:`.arms`: the arms, how each model arm is built, and the manager spec each is served with;
- :mod:`.layout`: :class:`~.layout.Study`, where each stage's files live;
- :mod:`.episode_metrics`, :mod:`.report`: the numbers, the record and the figures.
"""
