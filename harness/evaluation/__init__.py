"""Evaluation layer: scorers, submission validation and grading."""
