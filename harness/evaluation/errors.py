"""Errors of the evaluation layer.

*Invalid is not wrong*: an invalid submission (missing file, wrong columns, unparsable answer) raises
:class:`InvalidSubmissionError` and is scored ``None``; a valid but wrong answer scores ``0``.
"""


class InvalidSubmissionError(ValueError):
    """The submission cannot be graded (its score is ``None``, not 0). The message names what is wrong and the fix."""
