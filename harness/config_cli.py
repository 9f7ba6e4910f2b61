"""Dataclass configs on the command line, in the style of TRL's ``TrlParser`` and transformers' ``HfArgumentParser``,
for the commands whose core install has no transformers.

:func:`add_config_arguments` adds to an argparse parser (a command's own, or a ``stateguard`` sub-command's)
``--config FILE.yaml`` and one flag per field of one or more dataclasses; :func:`parse_config` turns the parsed
``Namespace`` into the dataclass instances, in the order the classes were given::

    add_config_arguments(parser, EvaluationConfig, what="evaluation", example="configs/eval/smoke.yaml")
    args = parser.parse_args(argv)
    (config,) = parse_config(args)

**Precedence**: the dataclass defaults, then the YAML file, then the flags typed. YAML keys are field names (a name
that two of the classes share sets both, once).

**Flags** (as ``HfArgumentParser`` spells them):

- every field ``field_name`` is ``--field_name`` and ``--field-name``; a command may add aliases (``aliases=``, e.g.
  ``--resamples`` for ``n_resamples``);
- ``bool``: ``--flag`` (true), ``--flag true|false`` (also ``yes/no``, ``1/0``, ``t/f``, ``y/n``), and
  ``--no_flag`` / ``--no-flag`` (false). ``HfArgumentParser`` adds the ``--no_`` form only when the default is true;
  here every bool has it, so a flag can turn off what a file turned on;
- ``list[X]``, ``tuple[X, ...]``, ``set[X]``: one or more values, ``--managers none rule`` (``nargs="+"``, as
  ``HfArgumentParser``; a value is never split). An alias of a list field takes one comma-separated value instead,
  ``--manager none,rule`` (the spelling some commands had before);
- ``X | None``: the value ``null`` sets None (``--limit null``);
- ``int``, ``float``, ``Literal[...]``, enums: the text is read as that type (``--runs 2``); text that is not one
  stays text and fails the type check with the others;
- mappings, nested dataclasses, lists of lists and ``Any``: one YAML value (``--runtime '{max_actions: 2}'``);
- help: the field's ``metadata["help"]``, else the field's docstring (a string right after it in the class body),
  then its default.

**Checks**: the file's values and the flags' values go through :func:`harness.yaml_config.type_problems` (nothing is
coerced: ``runs: "2"`` in a file is an error, as in every config of the project); unknown YAML keys are refused with
the valid keys; a required field set nowhere is named with its flag. Every problem is reported at once in one
:class:`ConfigError` (a ``ValueError``) of one line: the file's problems after its path (``FILE: field 'runs' must be
int, got str 'two'``), a flag's naming the flag as typed (``flag '--runs' must be int, got str 'two'``). The class's
own ``__post_init__`` errors pass through with their type, after the file's path when a file was given.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import inspect
import logging
import textwrap
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import yaml

from harness.pyast import parse_python
from harness.yaml_config import (
    construct,
    fix_suffix,
    prefixed,
    read_yaml_mapping,
    type_problems,
    unknown_message,
)

logger = logging.getLogger(__name__)

CONFIG_FLAG = "--config"
_REGISTRATION = "_config_cli"  # Namespace attribute (a parser default): what add_config_arguments registered
_GIVEN = "_config_cli_given"  # Namespace attribute: field -> _Typed, for the flags on the command line
_TRUE = ("true", "yes", "y", "t", "1", "on")
_FALSE = ("false", "no", "n", "f", "0", "off")
NONE = type(None)


class ConfigError(ValueError):
    """A config that cannot be built from its file and flags; the one-line message names each problem and the fix."""


@dataclass(frozen=True)
class _Registration:
    classes: tuple[type, ...]
    skip: frozenset[str]
    what: str
    example: str
    flags: dict[str, str]  # field -> its flag, for messages


@dataclass(frozen=True)
class _Typed:
    option: str  # the flag as typed
    value: Any  # the raw text (a str, a list of str), or True/False for a bare bool flag


def add_config_arguments(
    parser: argparse.ArgumentParser,
    *classes: type,
    what: str = "",
    example: str = "",
    default_config: str | None = None,
    require_config: bool = False,
    aliases: Mapping[str, str | Sequence[str]] | None = None,
    skip: Collection[str] = (),
) -> None:
    """Add ``--config FILE`` and one flag per field of ``classes`` to ``parser`` (see the module docstring).

    ``what`` names the config in messages (``evaluation``) and ``example`` is a file to suggest (``configs/eval/
    smoke.yaml``); ``default_config``: the file read when ``--config`` is not given (None: none, the dataclass
    defaults); ``require_config``: ``--config`` must be given (for a long job whose defaults are not a run to start
    by accident); ``aliases``: field -> more flags for it (a list field's alias takes one comma-separated value);
    ``skip``: fields that are neither flags nor YAML keys here (the command sets them)."""
    if not classes or not all(dataclasses.is_dataclass(c) and isinstance(c, type) for c in classes):
        raise TypeError(f"add_config_arguments: give dataclass types, got {classes!r}")
    aliases = {k: [v] if isinstance(v, str) else list(v) for k, v in (aliases or {}).items()}
    seen: dict[str, dataclasses.Field] = {}
    flags: dict[str, str] = {}
    parser.add_argument(
        CONFIG_FLAG,
        dest="config",
        default=default_config,
        required=require_config,
        metavar="FILE.yaml",
        help=f"YAML file of {what + ' ' if what else ''}config fields (keys = field names), e.g. "
        f"{example or default_config or 'config.yaml'}; flags override it"
        + (f" (default: {default_config})" if default_config else ""),
    )
    for cls in classes:
        docs = _field_docs(cls)
        hints = _hints(cls)
        group = parser.add_argument_group(f"{cls.__name__} (YAML keys of {CONFIG_FLAG}; the flags override them)")
        for f in dataclasses.fields(cls):
            if not f.init or f.name in skip or f.name in seen:
                continue
            if f.name == "config":
                raise TypeError(f"{cls.__name__}.config: a field may not be called config (it is {CONFIG_FLAG})")
            seen[f.name] = f
            flags[f.name] = f"--{f.name}"
            _add_field(group, f, hints.get(f.name, Any), docs.get(f.name, ""), aliases.get(f.name, []))
    unknown = sorted(set(aliases) - set(seen))
    if unknown:
        raise TypeError(f"add_config_arguments: aliases for unknown field(s) {unknown}")
    registration = _Registration(tuple(classes), frozenset(skip), what or "YAML", example or "config.yaml", flags)
    parser.set_defaults(**{_REGISTRATION: registration})


def parse_config(args: argparse.Namespace) -> tuple[Any, ...]:
    """The instances of the classes given to :func:`add_config_arguments`, built from their defaults, the
    ``--config`` file and the flags typed (in that order of precedence); raises :class:`ConfigError` (see the
    module docstring) or the class's own ``ValueError``."""
    registration: _Registration | None = getattr(args, _REGISTRATION, None)
    if registration is None:
        raise TypeError("parse_config: the parser has no config arguments; call add_config_arguments on it first.")
    path = getattr(args, "config", None)
    try:
        from_file = read_yaml_mapping(path, registration.what, registration.example) if path else {}
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    typed: dict[str, _Typed] = getattr(args, _GIVEN, None) or {}
    fields = {f.name: cls for cls in reversed(registration.classes) for f in dataclasses.fields(cls) if f.init}
    valid = sorted(set(fields) - registration.skip)

    file_problems = []
    if unknown := sorted(set(from_file) - set(valid), key=str):
        file_problems.append(unknown_message(unknown, valid, "key", "keys"))
    from_file = {k: v for k, v in from_file.items() if k in valid}
    from_flags = {name: _from_flag(t.value, _hints(fields[name]).get(name, Any)) for name, t in typed.items()}
    names = {name: t.option for name, t in typed.items()}
    file_wrong: list[str] = []
    flag_wrong: list[str] = []
    for cls in registration.classes:
        own = {f.name for f in dataclasses.fields(cls)}
        file_wrong += type_problems(cls, {k: v for k, v in from_file.items() if k in own})
        flag_wrong += type_problems(cls, {k: v for k, v in from_flags.items() if k in own}, "flag", names=names)
    file_problems += list(dict.fromkeys(file_wrong))
    flag_problems = list(dict.fromkeys(flag_wrong))
    merged = {**from_file, **from_flags}
    missing = [
        f.name
        for cls in registration.classes
        for f in dataclasses.fields(cls)
        if f.init and _required(f) and f.name not in merged
    ]
    parts = [f"{path}: {'; '.join(file_problems)}"] if file_problems else []
    parts += flag_problems
    if missing := list(dict.fromkeys(missing)):
        where = f"in {path}" if path else f"in a {CONFIG_FLAG} file"
        flags = " ".join(f"{registration.flags.get(m, '--' + m)} ..." for m in missing)
        parts.append(f"missing required field(s) {missing}; pass {flags} or set them {where}")
    if parts:
        raise ConfigError("; ".join(parts) + fix_suffix(file_wrong + flag_wrong) + ".")
    built = []
    for cls in registration.classes:
        data = {f.name: merged[f.name] for f in dataclasses.fields(cls) if f.name in merged}
        try:
            built.append(construct(cls, data))
        except ValueError as exc:  # the class's own checks, after the file's path
            if not path:
                raise
            raise prefixed(exc, f"{path}: ") from exc
    return tuple(built)


def given_flag(args: argparse.Namespace, name: str) -> str | None:
    """The flag that set field ``name`` on the command line, as typed (``--out``); None when no flag set it."""
    typed = (getattr(args, _GIVEN, None) or {}).get(name)
    return typed.option if typed is not None else None


# ---------------------------------------------------------------------------------------------------------------------
# the flags


class _Store(argparse.Action):
    """Records ``(option as typed, raw value)`` of one field in the namespace (the parser's defaults stay out of it,
    so :func:`parse_config` knows what the command line set)."""

    def __init__(self, option_strings, dest, field: str = "", fixed: Any = None, comma: bool = False, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.field, self.fixed, self.comma = field, fixed, comma

    def __call__(self, parser, namespace, values, option_string=None):
        given = getattr(namespace, _GIVEN, None)
        if given is None:
            given = {}
            setattr(namespace, _GIVEN, given)
        if self.fixed is not None:
            values = self.fixed
        elif self.comma:
            values = [v.strip() for v in str(values).split(",") if v.strip()]
        given[self.field] = _Typed(option_string or self.option_strings[0], values)


def _add_field(group: Any, f: dataclasses.Field, tp: Any, doc: str, aliases: Sequence[str]) -> None:
    arms, optional = _arms(tp)
    arm = arms[0] if len(arms) == 1 else None
    origin = typing.get_origin(arm) if arm is not None else None
    spellings = list(dict.fromkeys([f"--{f.name}", f"--{f.name.replace('_', '-')}"]))
    help_text = _help(f, doc, optional)
    common = {"dest": f.name, "default": argparse.SUPPRESS, "field": f.name, "help": help_text}
    if arm is bool:
        negatives = list(dict.fromkeys([f"--no_{f.name}", f"--no-{f.name.replace('_', '-')}"]))
        group.add_argument(*spellings, *aliases, action=_Store, nargs="?", const=True, metavar="BOOL", **common)
        group.add_argument(*negatives, action=_Store, nargs=0, fixed=False, **{**common, "help": f"--{f.name} false"})
        return
    metavar = _metavar(f.name, arm)
    if origin in (list, tuple, set, frozenset) and _scalar(_item(arm)):
        group.add_argument(*spellings, action=_Store, nargs="+", metavar=_metavar(f.name, _item(arm)), **common)
        for alias in aliases:
            alias_help = f"{spellings[0]} as one comma-separated value (A,B,...)"
            group.add_argument(alias, action=_Store, comma=True, metavar="A,B", **{**common, "help": alias_help})
        return
    group.add_argument(*spellings, *aliases, action=_Store, metavar=metavar, **common)


def _help(f: dataclasses.Field, doc: str, optional: bool) -> str:
    text = str(f.metadata.get("help") or doc or "").strip()
    if f.default is not dataclasses.MISSING:
        default = f"default: {_show(f.default)}"
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        default = f"default: {_show(f.default_factory())}"  # type: ignore[misc]
    else:
        default = f"required, here or in {CONFIG_FLAG}"
    text = f"{text} ({default})" if text else f"({default})"
    return text.replace("%", "%%")  # argparse formats help with %


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return " ".join(_show(v) for v in value) if value else "[]"
    if isinstance(value, dict):
        return yaml.safe_dump(value, default_flow_style=True).strip() if value else "{}"
    return str(value)


def _metavar(name: str, tp: Any) -> str:
    if typing.get_origin(tp) is typing.Literal:
        return "{" + ",".join(str(a) for a in typing.get_args(tp)) + "}"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "{" + ",".join(str(m.value) for m in tp) + "}"
    if typing.get_origin(tp) in (dict, Mapping) or dataclasses.is_dataclass(tp):
        return "YAML"
    return name.upper()


def _field_docs(cls: type) -> dict[str, str]:
    """Field name -> its docstring (a string literal right after the field in the class body), for ``cls`` and its
    dataclass bases; empty when the source is not available."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = parse_python(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


# ---------------------------------------------------------------------------------------------------------------------
# flag text -> value (checked afterwards by type_problems)


def _from_flag(raw: Any, tp: Any) -> Any:
    """The value of a flag: ``raw`` (text, a list of texts, or True/False from a bare bool flag) read as ``tp``."""
    if isinstance(raw, bool):
        return raw
    arms, optional = _arms(tp)
    if isinstance(raw, list):
        if optional and raw == ["null"]:
            return None
        container = next((a for a in arms if typing.get_origin(a) in (list, tuple, set, frozenset)), None)
        item = _item(container) if container is not None else Any
        return [_from_text(v, item) for v in raw]
    return _from_text(raw, tp)


def _from_text(text: str, tp: Any) -> Any:
    arms, optional = _arms(tp)
    if optional and text == "null":
        return None
    for arm in arms:
        value = _scalar_from_text(text, arm)
        if value is not _NO:
            return value
    if any(_texty(arm) for arm in arms):
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


_NO = object()


def _scalar_from_text(text: str, tp: Any) -> Any:
    """``text`` read as the scalar type ``tp``, or ``_NO``."""
    if tp is bool:
        low = text.strip().lower()
        return True if low in _TRUE else False if low in _FALSE else _NO
    if tp is int:
        try:
            return int(text)
        except ValueError:
            return _NO
    if tp is float:
        try:
            return float(text)
        except ValueError:
            return _NO
    if typing.get_origin(tp) is typing.Literal:
        return next((a for a in typing.get_args(tp) if str(a) == text), _NO)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return next((m for m in tp if str(m.value) == text or m.name == text), _NO)
    return _NO


def _texty(tp: Any) -> bool:
    return tp is str or tp is Any or (isinstance(tp, type) and issubclass(tp, PurePath))


def _scalar(tp: Any) -> bool:
    """Whether one command-line word is one item (not a YAML value): str, numbers, bools, paths, Literal, enums."""
    arms, _ = _arms(tp)
    return all(
        _texty(a)
        and a is not Any
        or a in (int, float, bool)
        or typing.get_origin(a) is typing.Literal
        or (isinstance(a, type) and issubclass(a, enum.Enum))
        for a in arms
    )


def _item(tp: Any) -> Any:
    args = typing.get_args(tp)
    return args[0] if args else Any


def _arms(tp: Any) -> tuple[list[Any], bool]:
    """The non-None arms of ``tp`` and whether None is allowed."""
    if typing.get_origin(tp) is typing.Union or isinstance(tp, types.UnionType):
        args = typing.get_args(tp)
        return [a for a in args if a is not NONE], NONE in args
    return [tp], tp is None or tp is NONE


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - as harness.yaml_config: an unresolvable annotation leaves the value as text
        return {}


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
