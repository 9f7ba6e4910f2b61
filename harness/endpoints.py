"""The endpoint preflight: every OpenAI-compatible endpoint a run names answers before any episode is played.

A run names endpoints in its manager specs (``llm:URL``, ``freeform:URL``, ``windowed:K:URL``, ``hier:llm:URL``)
and its worker spec (``openai:URL``). :func:`spec_endpoints` lists them; :func:`check_endpoints` asks each one
``GET URL/models`` with a short timeout and raises :class:`EndpointError`, one line naming the spec, the URL, what
failed and the fix, when it is unreachable, answers an error, lists no model, or does not serve the model id a
caller names. Without the check a run with the server down would play every episode with a silent manager and
report it as the manager's result.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness.llm import ChatEndpointError, OpenAIChatBackend
from harness.specs import parse_manager_spec, parse_worker_spec

PREFLIGHT_TIMEOUT_S = 5.0
FIX = "start the server (e.g. `stateguard serve --checkpoint DIR --port PORT`) or fix the URL"


class EndpointError(ValueError):
    """An endpoint a run names does not answer as it should; the message names the spec, the URL and the fix."""


def spec_endpoints(managers: Iterable[str] = (), worker: str | None = None) -> list[tuple[str, str]]:
    """``(spec, url)`` of every endpoint named by the manager specs and the worker spec, in order, each URL once."""
    found: list[tuple[str, str]] = []
    for spec in managers:
        parsed = parse_manager_spec(spec, check_paths=False)
        if parsed.model is not None and not parsed.in_process:
            found.append((f"--manager {spec}", parsed.model))
    if worker is not None:
        parsed_worker = parse_worker_spec(worker)
        if parsed_worker.kind == "openai":
            found.append((f"--worker {worker}", parsed_worker.argument))
    seen: set[str] = set()
    return [(spec, url) for spec, url in found if not (url in seen or seen.add(url))]


def endpoint_problem(url: str, model: str | None = None, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> str | None:
    """What is wrong with the endpoint ``url`` (``GET url/models``), or None when it serves ``model`` (any model
    when None)."""
    try:
        ids = OpenAIChatBackend(url, timeout_s=timeout_s).models()
    except ConnectionError as exc:
        reason = exc.__cause__ if exc.__cause__ is not None else exc
        reason = getattr(reason, "reason", reason)
        return f"GET {url.rstrip('/')}/models failed ({reason})"
    except ChatEndpointError as exc:
        return str(exc)
    if not ids:
        return f"{url.rstrip('/')}/models lists no model"
    if model is not None and model not in ids:
        return f"the model {model!r} is not served (it serves {ids[:5]})"
    return None


def check_endpoints(endpoints: Sequence[tuple[str, str]], timeout_s: float = PREFLIGHT_TIMEOUT_S) -> None:
    """Raise :class:`EndpointError` for the first ``(spec, url)`` whose endpoint does not answer (see
    :func:`endpoint_problem`)."""
    for spec, url in endpoints:
        problem = endpoint_problem(url, timeout_s=timeout_s)
        if problem is not None:
            raise EndpointError(f"{spec}: the endpoint does not answer: {problem}; {FIX}.")
