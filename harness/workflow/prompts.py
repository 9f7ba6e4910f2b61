"""Default prompt templates of the operators (``string.Template``: ``$name`` fields, so JSON braces need no escape).

Every template starts with ``Step: <operator>`` so a transcript shows which operator asked. Fields: ``$contract`` (the
task contract: objective, data profile, output rules), ``$target`` (what the program must write, from the task's
submission contract), ``$notes`` (supervisor notes and hints, may be empty), ``$memory`` (summaries of earlier
questions, may be empty), ``$analysis``, ``$plan``, ``$code``, ``$error``, ``$output``, ``$validation``,
``$issues``, ``$question``, ``$answer``. Override any of them with :attr:`WorkflowConfig.prompts
<harness.workflow.config.WorkflowConfig.prompts>`.
"""

from __future__ import annotations

SYSTEM = """You are a careful data scientist. You write correct, complete Python programs (pandas and numpy are \
available) and you follow the requested reply format exactly. Supervisor notes are for reference only: verify them \
before you rely on them."""

PROMPTS: dict[str, str] = {
    "analyze": """Step: analyze
$contract
$memory$notes
Study the task and the data report. Reply with JSON only:
{"findings": ["<what the data holds that matters here>", ...], "answer_form": "<what the answer must look like>"}""",
    "plan": """Step: plan
$contract

Analysis:
$analysis
$memory$notes
Write a short plan. Reply with JSON only: {"steps": ["<step>", ...]}""",
    "generate": """Step: generate
$contract

Plan:
$plan
$memory$notes
Write one complete Python program in a ```python block that $target. It runs in the persistent session: the \
variables DATA_DIR and WORK_DIR are defined, and variables of earlier programs are still there.""",
    "direct": """Step: direct
$contract
$notes
Write one complete, self-contained Python program in a ```python block that $target. It runs in a fresh process: \
read the data from the directory in the environment variable DATA_DIR and write outputs to the directory in the \
environment variable WORK_DIR.""",
    "draft": """Step: draft
$contract
$notes
This is draft $draft of several independent attempts. Write one complete, self-contained Python program in a \
```python block that $target. It runs in a fresh process; the environment variables DATA_DIR and WORK_DIR hold the \
data and output directories.""",
    "debug": """Step: debug
$contract

This program:
```python
$code
```
failed:
$error
$notes
Reply with the corrected complete program in one ```python block.""",
    "review": """Step: review
$contract

Program:
```python
$code
```
Its output:
$output
Submission check: $validation

How likely is the submission to answer the task correctly? Reply with JSON only:
{"score": <a number from 0 to 1>, "issues": ["<a concrete problem>", ...]}""",
    "improve": """Step: improve
$contract

Program:
```python
$code
```
Review issues:
$issues
$notes
Reply with an improved complete program in one ```python block that $target.""",
    "summarize": """Step: summarize
Question:
$question

Program:
```python
$code
```
Answer: $answer

In at most three sentences, say what was computed and which variables hold the results, for later questions.""",
}
"""Operator name -> default template."""
