"""YAML -> dataclass config (YAML keys equal field names).

:func:`load_yaml_config` reads a YAML mapping into a dataclass after checking it against the class: unknown keys,
missing required fields, and the type of every value against the field's annotation (``int``, ``float``, ``bool``,
``str``, ``Path``, ``list[X]``, ``tuple[X, ...]``, ``dict[K, V]``, ``X | None``, unions, ``Literal[...]``, enums and
nested dataclasses, at any depth). All the problems of a file are reported at once, in one ``ValueError`` that names
the file, each field (``n_turns[1]``, ``prompts.plan`` for elements) and the type it must have. Nothing is coerced:
an int is a valid float, but a bool is not an int, ``"2"`` is not an int and ``commerce`` is not a list. Overrides
(command-line flags) go through the same check. :func:`type_problems` is the check alone, for other loaders;
:func:`build_config` is the one checked way to build a config from a mapping in code, :func:`read_yaml_mapping` reads
a file, and :mod:`harness.config_cli` puts a config's fields on the command line with the same checks.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import logging
import sys
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any, TypeVar

import yaml

logger = logging.getLogger(__name__)

T = TypeVar("T")
NONE = type(None)


def load_yaml_config(cls: type[T], path: str | Path, what: str, example: str, **overrides: Any) -> T:
    """``cls(**yaml, **overrides)`` from ``path``; overrides that are ``None`` are ignored (unset command-line flags).

    Errors (``ValueError``) name the file and the fix: a missing file (with ``example``, e.g.
    ``configs/synthesis/smoke.yaml``), a file that is not UTF-8 text or not YAML, a document that is not a mapping,
    unknown keys (with the valid ones), missing required fields, values of the wrong type (every one of them, with
    the field and the expected type), and the ``ValueError`` of the class's own ``__post_init__`` checks."""
    path = Path(path)
    data = read_yaml_mapping(path, what, example)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given = {k: v for k, v in overrides.items() if v is not None}
    problems = [
        unknown_message(unknown, names, kind, "keys")
        for kind, keys in (("key", data), ("override", given))
        if (unknown := sorted(set(keys) - names, key=str))
    ]
    wrong = type_problems(cls, data) + type_problems(cls, given, label="override")
    missing = [f.name for f in _required(cls) if f.name not in data and f.name not in given]
    if missing:
        problems.append(f"missing required field(s) {missing}; add them")
    if problems or wrong:
        raise ValueError(f"{path}: {'; '.join(problems + wrong)}{fix_suffix(wrong)}.")
    data.update(given)
    try:
        return construct(cls, data)
    except ValueError as exc:  # the class's own checks (__post_init__): say which file holds the values
        raise ValueError(f"{path}: {exc}") from exc


def read_yaml_mapping(path: str | Path, what: str, example: str) -> dict[str, Any]:
    """The YAML mapping in ``path`` (an empty file is ``{}``); a missing file, a file that is not UTF-8 text or not
    YAML, and a document that is not a mapping raise ``ValueError`` naming the file and the fix (``what``: the kind
    of config, ``example``: a file to pass instead)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such {what} config; pass a YAML file such as {example}.")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text file; pass a YAML file such as {example}.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ValueError(f"{path}: not valid YAML ({problem}{where}); fix the syntax there.") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of field names to values, got {type(data).__name__}.")
    return data


def build_config(cls: type[T], data: Mapping[str, Any], *, source: str = "", label: str = "field") -> T:
    """``cls(**data)`` after the checks of :func:`load_yaml_config` on ``data`` (unknown keys with the valid ones,
    missing required fields, the type of every value): every problem in one ``ValueError``. ``source`` (a file, or
    the caller, e.g. ``pipeline evaluate stage``) starts the message and that of the class's own ``__post_init__``
    checks (raised again with the same type); ``label`` names the values (``field``, ``argument``)."""
    head = f"{source}: " if source else ""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    problems = []
    if unknown := sorted(set(data) - names, key=str):
        problems.append(unknown_message(unknown, names, label, f"{label}s"))
    if missing := [f.name for f in _required(cls) if f.name not in data]:
        problems.append(f"missing required {label}(s) {missing}; add them")
    wrong = type_problems(cls, data, label=label)
    if problems or wrong:
        raise ValueError(f"{head}{'; '.join(problems + wrong)}{fix_suffix(wrong)}.")
    try:
        return construct(cls, data)
    except ValueError as exc:  # the class's own checks: the same error type, after the source
        if not head:
            raise
        raise prefixed(exc, head) from exc


def prefixed(exc: ValueError, head: str) -> ValueError:
    """``exc`` again, of the same type, with ``head`` (e.g. ``FILE: ``) before its message."""
    try:
        return type(exc)(f"{head}{exc}")
    except Exception:  # noqa: BLE001 - an error type whose constructor takes other arguments
        return ValueError(f"{head}{exc}")


def construct(cls: type[T], data: Mapping[str, Any]) -> T:
    """``cls(**data)`` with mappings for dataclass-typed fields (also ``X | None``) turned into instances; no checks
    (run :func:`type_problems` first). The ``ValueError`` of the class's own checks is left to the caller."""
    hints = _hints(cls)
    return cls(**{k: _build(v, hints.get(k, Any)) for k, v in data.items()})


def unknown_message(unknown: Sequence[Any], names: Iterable[str], kind: str, valid: str) -> str:
    """``unknown key(s) ['managrs'] (did you mean 'managers'?)`` when every unknown name has a close match among
    ``names`` (difflib), else the unknown names and every valid one (``kind``: key, override, field; ``valid``: how
    the list of valid names is headed)."""
    names = sorted(names)
    close = {str(u): difflib.get_close_matches(str(u), names, n=1) for u in unknown}
    if all(close.values()):
        guesses = ", ".join(f"{u!r} -> {m[0]!r}" if len(close) > 1 else repr(m[0]) for u, m in close.items())
        return f"unknown {kind}(s) {list(unknown)} (did you mean {guesses}?)"
    return f"unknown {kind}(s) {list(unknown)}; valid {valid}: {names}"


def fix_suffix(wrong: Sequence[str]) -> str:
    """``"; fix the value"`` / ``"; fix the values"`` after type problems (nothing when there are none)."""
    return f"; fix the value{'s' if len(wrong) > 1 else ''}" if wrong else ""


def type_problems(
    cls: type,
    data: Mapping[str, Any],
    label: str = "field",
    prefix: str = "",
    names: Mapping[str, str] | None = None,
) -> list[str]:
    """One message per value of ``data`` whose type does not match the annotation of the field of ``cls`` it sets
    (``field 'seed' must be int, got str 'zero'``; ``prefix`` goes before each field name, e.g. ``train_synthesis.``;
    ``names`` maps a field to the name shown instead, e.g. ``n_resamples`` -> ``--resamples`` for a flag); keys that
    are not fields of ``cls`` are not checked here."""
    hints = _hints(cls)
    shown = names or {}
    fields = [f.name for f in dataclasses.fields(cls) if f.name in data]
    return [
        p
        for name in fields
        for p in _problems(data[name], hints.get(name, Any), shown.get(name, prefix + name), label)
    ]


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception as exc:  # noqa: BLE001 - an unresolvable annotation must not make the config unloadable
        logger.warning("%s: field annotations not resolvable (%s); values are not type-checked", cls.__name__, exc)
        return {}


def _required(cls: type) -> list[dataclasses.Field]:
    missing = dataclasses.MISSING
    return [f for f in dataclasses.fields(cls) if f.init and f.default is missing and f.default_factory is missing]


# ---------------------------------------------------------------------------------------------------------------------
# the check


def _problems(value: Any, tp: Any, where: str, label: str) -> list[str]:
    """Messages for ``value`` against annotation ``tp``; ``where`` is the field path (``n_turns[1]``)."""
    if not _shape_ok(value, tp):
        return [f"{label} '{where}' must be {_expected(tp)}, got {_got(value)}{_hint(value, tp)}"]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if _is_union(tp):
        arms = [a for a in args if a is not NONE]
        if value is None:
            return []
        if len(arms) == 1:
            return _problems(value, arms[0], where, label)
        if any(not _problems(value, arm, where, label) for arm in arms):
            return []
        return [f"{label} '{where}' must be {_expected(tp)}, got {_got(value)}"]
    if origin in (list, set, frozenset) or (origin is tuple and (not args or args[-1] is Ellipsis)):
        item = args[0] if args else Any
        return [p for i, v in enumerate(value) for p in _problems(v, item, f"{where}[{i}]", label)]
    if origin is tuple:
        if len(value) != len(args):
            return [f"{label} '{where}' must have {len(args)} items ({_expected(tp)}), got {len(value)}"]
        return [
            p
            for i, (v, a) in enumerate(zip(value, args, strict=True))
            for p in _problems(v, a, f"{where}[{i}]", label)
        ]
    if origin in (dict, Mapping):
        key_tp, value_tp = args if len(args) == 2 else (Any, Any)
        found = []
        for key, item in value.items():
            if not _shape_ok(key, key_tp):
                found.append(f"{label} '{where}' key {key!r} must be {_expected(key_tp)}, got {_got(key)}")
            found += _problems(item, value_tp, f"{where}.{key}", label)
        return found
    if dataclasses.is_dataclass(tp) and isinstance(value, dict):
        names = {f.name for f in dataclasses.fields(tp)}
        found = []
        if unknown := sorted(set(value) - names, key=str):
            found.append(f"{label} '{where}' has {unknown_message(unknown, names, 'key', 'keys')}")
        if missing := [f.name for f in _required(tp) if f.name not in value]:
            found.append(f"{label} '{where}' is missing required field(s) {missing}")
        hints = _hints(tp)
        for name in sorted(names & set(value)):
            found += _problems(value[name], hints.get(name, Any), f"{where}.{name}", label)
        return found
    return []


def _shape_ok(value: Any, tp: Any) -> bool:
    """Whether ``value`` has the outer type ``tp`` asks for (items of containers are checked by the caller)."""
    if tp is Any or tp is object or isinstance(tp, TypeVar):
        return True
    if tp is None or tp is NONE:
        return value is None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if _is_union(tp):
        return any(_shape_ok(value, arm) for arm in args)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin in (list, tuple, set, frozenset):
        return isinstance(value, (list, tuple)) and not (origin in (set, frozenset) and len(set(value)) != len(value))
    if origin in (dict, Mapping):
        return isinstance(value, dict)
    if origin is not None:  # another generic (Callable[...], type[...]): not something YAML writes; not checked
        return True
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return isinstance(value, tp) or any(value == m.value and type(value) is type(m.value) for m in tp)
    if isinstance(tp, type) and issubclass(tp, PurePath):
        return isinstance(value, (str, PurePath))
    if dataclasses.is_dataclass(tp):
        return isinstance(value, (dict, tp))
    if tp is list or tp is tuple:
        return isinstance(value, (list, tuple))
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True  # an annotation this check does not know (a string that did not resolve, a Protocol ...)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) is typing.Union or isinstance(tp, types.UnionType)


def _expected(tp: Any) -> str:
    """``int``, ``list[str]``, ``int or null``, ``one of 'bwrap', 'none'``, ``a mapping of X fields``."""
    if _is_union(tp):
        arms = [a for a in typing.get_args(tp) if a is not NONE]
        text = " or ".join(_expected(a) for a in arms)
        return text + " or null" if len(arms) < len(typing.get_args(tp)) else text
    if typing.get_origin(tp) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(repr(m.value) for m in tp)
    if dataclasses.is_dataclass(tp):
        return f"a mapping of {tp.__name__} fields"
    if tp is float:
        return "float (a number)"
    if tp is bool:
        return "bool (true or false)"
    if isinstance(tp, type) and issubclass(tp, PurePath):
        return "str (a path)"
    return _name(tp)


def _name(tp: Any) -> str:
    """Python's spelling of an annotation: ``list[str]``, ``dict[str, Any]``, ``int | None``."""
    if tp is NONE or tp is None:
        return "None"
    if tp is Any:
        return "Any"
    if _is_union(tp):
        return " | ".join(_name(a) for a in typing.get_args(tp))
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else _name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]" if args else getattr(origin, "__name__", str(tp))
    return getattr(tp, "__name__", str(tp))


def _got(value: Any) -> str:
    if value is None:
        return "null"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _hint(value: Any, tp: Any) -> str:
    """A fix for the common slips: a scalar where a list belongs, a number YAML read as text, a quoted number or
    boolean, a number where text belongs."""
    arms = [a for a in typing.get_args(tp) if a is not NONE] if _is_union(tp) else [tp]
    outer = {typing.get_origin(a) or a for a in arms}
    if isinstance(value, (str, int, float)) and outer & {list, tuple, set, frozenset}:
        return f" (write a YAML list, e.g. [{value}])"
    if isinstance(value, str) and outer & {int, float}:
        try:
            float(value)
        except ValueError:
            return ""
        if float in outer and "e" in value.lower() and "." not in value.split("e")[0].lower():
            return f" (YAML reads {value} as text; write it with a dot, e.g. {value.lower().replace('e', '.0e', 1)})"
        return " (write the number without quotes)"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and str in outer:
        return f" (quote it: '{value}')"
    if isinstance(value, str) and bool in outer and value.lower() in ("true", "false", "yes", "no", "on", "off"):
        return " (write true or false without quotes)"
    return ""


# ---------------------------------------------------------------------------------------------------------------------
# construction


def _build(value: Any, tp: Any) -> Any:
    """``value`` with mappings for dataclass-typed fields (also ``X | None``) turned into instances (checked)."""
    arms = [a for a in typing.get_args(tp) if a is not NONE] if _is_union(tp) else [tp]
    target = next((a for a in arms if dataclasses.is_dataclass(a) and isinstance(a, type)), None)
    if target is None or not isinstance(value, dict):
        return value
    hints = _hints(target)
    return target(**{k: _build(v, hints.get(k, Any)) for k, v in value.items()})


def check_parser_config(classes: Sequence[type], argv: Sequence[str]) -> None:
    """Check the YAML file of ``--config PATH`` in ``argv`` against ``classes`` (the dataclasses of one
    ``TrlParser`` / ``HfArgumentParser``) before the parser reads it: each key is checked against the class that has
    it, and every wrong type is named in one ``ValueError`` with the file (the parser itself accepts ``max_steps:
    2.5`` and prints its whole usage for ``learning_rate: fast``). Unknown keys are left to the parser; no
    ``--config``: nothing to check."""
    path = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--config"), None)
    path = path or next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), None)
    if path is None or not Path(path).is_file():
        return
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not a readable YAML file ({type(exc).__name__}); fix the syntax there.") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of field names to values, got {type(data).__name__}.")
    problems: list[str] = []
    left = dict(data)
    for cls in classes:  # a key is checked against the first class that has it, as the parser assigns it
        names = {f.name for f in dataclasses.fields(cls)}
        problems += type_problems(cls, {k: left.pop(k) for k in list(left) if k in names})
    if problems:
        raise ValueError(f"{path}: {'; '.join(problems)}; fix the values.")


def parse_checked(parser: Any, argv: Sequence[str] | None, prog: str) -> tuple[Any, ...]:
    """``parser.parse_args_and_config(argv)`` (a ``TrlParser``) after :func:`check_parser_config` over the parser's
    dataclasses; a config with wrong types ends the process with one line naming ``prog``, the file and every field
    (exit 2, as argparse errors do)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        check_parser_config(parser.dataclass_types, args)
    except ValueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return parser.parse_args_and_config(args)
