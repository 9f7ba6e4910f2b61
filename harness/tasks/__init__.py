"""Data layer: task folders (MLE-bench style), their validation, grading dispatch, importers and the CLI.

Task folder format
==================

::

    task_dir/
      config.yaml       # required: the TaskConfig (below)
      description.md    # required: the objective as the worker sees it (path configurable: `description`)
      prepare.py        # optional: prepare(raw: Path, public: Path, private: Path) -> None (MLE-bench signature)
      grade.py          # optional: a custom grader, referenced as `grader: file:grade.py:grade`
      public/           # visible to the worker (mounted read-only in the sandbox); `public_dir`
      private/          # answers: never mounted, never shown to worker or manager; `private_dir`

``config.yaml`` (keys = fields of :class:`~harness.tasks.config.TaskConfig`; unknown keys are errors)::

    id: dabench-0                   # required; letters, digits, '.', '_', '-'
    kind: closed_form               # required; closed_form | artifact | multi_turn
    name: DABench 0                 # optional title
    description: description.md     # default
    grader: file:grade.py:grade     # or package.module:function; default per kind (DEFAULT_GRADERS)
    grader_style: stateguard        # stateguard: fn(submission, task) -> GradeResult | float
                                    # mlebench:   fn(submission_df, answers_df) -> float   (artifact only)
    public_dir: public              # default
    private_dir: private            # default
    answer_format: "@mean_fare[value] ..."   # closed_form (required there)
    submission:                     # artifact (required there)
      filename: submission.csv      #   the file the worker writes
      sample: sample_submission.csv #   relative to public/
      answers: answers.csv          #   relative to private/
      id_column: PassengerId        #   optional
      target_columns: [Transported] #   default: every sample column but the id column
      metric: accuracy              #   accuracy | f1 | rmse | mse | mae | r2 for the built-in grader
      higher_is_better: true        #   default: the metric's direction
    turns:                          # multi_turn (required there), in order; the public parts only
      - turn_id: "1"                #   unique (YAML integers are accepted and become strings)
        context: "..."              #   optional
        question: "..."
        depends_on: []              #   ids of earlier turns
        relation: init              #   init | progress | branch | invalidate | combine
        precision: 2                #   optional decimals for grading (default 4)
        constraints:                #   optional public conditions on the turn's result (part of the question)
          - text: "revenue is quantity * unit_price"                     # in words
            code: "assert (df.revenue == df.quantity * df.price).all()"  # optional check over the worker's
                                                                          # variables; raises or is False if violated
    metadata: {source: ..., level: ..., concepts: [...], license: ...}   # free-form

Private answers by kind: ``private/answers.json`` (closed_form: a JSON list of ``[name, value]`` string pairs, order
kept), ``private/reference.json`` (multi_turn: ``{turn_id: {"code": str, "answer": {...}}}``), ``private/<answers>``
(artifact: the answers CSV named by ``submission.answers``).

Relations must fit the dependencies: ``init`` has none, ``combine`` has two or more, ``progress``/``branch``/
``invalidate`` at least one; a turn may depend only on earlier turns.

Validation (:func:`load_task`, :func:`validate_task`, ``stateguard tasks validate``) reports every problem at once in
one :class:`TaskConfigError`, each naming the file, the field and the fix. Only graders and synthesis call
:meth:`Task.load_answers`.

Modules: :mod:`.config` (TaskConfig, parsing), :mod:`.checks` (semantic checks, TaskConfigError), :mod:`.task` (Task,
loader), :mod:`.grader_ref` (grader references), :mod:`.grading` (``grade_task``: submission by kind -> GradeResult),
:mod:`.mlebench_compat` (the ``mlebench`` import shim for MLE-bench ``grade.py``/``prepare.py``), :mod:`.importers`
(dabench, longds, dabstep, mlebench), :mod:`.cli` (``stateguard tasks``); :mod:`.profile` and :mod:`.contract` render
what the worker sees.
"""

from harness.tasks.config import (
    DEFAULT_GRADERS,
    KINDS,
    RELATIONS,
    Problem,
    SubmissionConfig,
    TaskConfig,
    TaskConfigError,
    Turn,
    TurnConstraint,
)
from harness.tasks.grading import grade_task, resolve_grader
from harness.tasks.task import (
    SubmissionSpec,
    Task,
    TaskNotFoundError,
    TurnReference,
    find_task_dirs,
    load_task,
    load_tasks,
    resolve_task_path,
    validate_task,
)

__all__ = [
    "DEFAULT_GRADERS",
    "KINDS",
    "RELATIONS",
    "Problem",
    "SubmissionConfig",
    "SubmissionSpec",
    "Task",
    "TaskConfig",
    "TaskConfigError",
    "TaskNotFoundError",
    "Turn",
    "TurnConstraint",
    "TurnReference",
    "find_task_dirs",
    "grade_task",
    "load_task",
    "load_tasks",
    "resolve_grader",
    "resolve_task_path",
    "validate_task",
]
