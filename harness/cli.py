"""The ``stateguard`` command line.

Sub-commands are plugins: each package registers ``name = "module:register"`` under the entry-point group
``stateguard.commands`` in ``pyproject.toml``, and ``register(subparsers)`` adds its argparse sub-parser with a
``func`` default that returns an exit code. The harness therefore never imports the higher layers (``training``,
``synthesis``) itself; they plug in. The commands come from the installed distribution's entry points; in a source
checkout without ``pip install -e .`` they are read from the repository's ``pyproject.toml`` instead.

    stateguard tasks validate PATH
    stateguard tasks import dabench --src DABENCH_DIR --out runs/tasks/dabench
    stateguard tasks grade TASK_DIR --answer "@mean_fare[34.65]"
    stateguard run --task retail-sales --worker scripted --manager rule --faults configs/faults/retail-sales.jsonl
    stateguard evaluate --suite heldout-seeds --manager none,rule --out runs/eval
    stateguard serve --checkpoint runs/sft-tiny-cpu --cpu
    stateguard bench run --suite dabench-dev --workflow react,direct,pipeline,search --model URL --out runs/bench
    stateguard view runs/synth/episodes/gold.jsonl --out episode.html
    stateguard pipeline --config configs/pipeline/demo.yaml --out runs/demo

Every command that writes files checks its output path first with :func:`prepare_out_dir` (a folder) or
:func:`prepare_out_file` (a file); bad input raises :class:`CommandLineError`, which :func:`main` prints as one line
``stateguard COMMAND: error: MESSAGE`` on stderr with exit code 2 (as argparse does for a malformed flag). A mistyped
flag is named under its sub-command's usage with its close match (:class:`CommandParser`), and every help text is
shown as plain text (:func:`plain_text`: no Sphinx roles, no double backticks, nothing after a :data:`HELP_ENDS` line).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import NoReturn

from harness import __version__

ENTRY_POINT_GROUP = "stateguard.commands"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
"""The source checkout's project file: where the commands are read from when the distribution is not installed."""


EXIT_USAGE = 2  # bad command-line input, as for argparse errors


class CommandLineError(Exception):
    """Bad command-line input found before any work; the message names the flag, the value, the reason and the fix.

    :func:`main` (and :func:`run_command`) print it as one line on stderr and exit with code 2. It is not a
    ``ValueError`` on purpose: the commands' own ``except ValueError`` handlers let it through to that one format."""


def prepare_out_dir(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """The output folder ``path``, created (with its parents) when missing and checked writable by creating and
    deleting a probe file in it (permission bits alone are not enough: root writes through a 0o555 folder).

    Raises :class:`CommandLineError` naming ``flag`` and ``path`` when ``path`` is a file, lies under a file, cannot
    be created or is not writable."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise CommandLineError(f"{flag} {out}: is a file, not a folder; pass a folder path (created when missing).")
    _ensure_folder(out, f"{flag} {out}:")
    return out


def prepare_out_file(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """The output file ``path``: not a folder; its folder created when missing and checked writable (as in
    :func:`prepare_out_dir`). An existing file is fine (it is overwritten later); ``path`` itself is not touched."""
    out = Path(path)
    if out.is_dir():
        raise CommandLineError(f"{flag} {out}: is a folder; pass a file path.")
    _ensure_folder(out.parent, f"{flag} {out}: its folder")
    return out


def _ensure_folder(folder: Path, prefix: str) -> None:
    """Create ``folder`` (with parents) and probe that a file can be created in it; errors start with ``prefix``."""
    blocker = next((p for p in (*reversed(folder.parents), folder) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise CommandLineError(f"{prefix} cannot be created: {blocker} is a file; pass a path under a folder.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CommandLineError(f"{prefix} cannot be created ({reason}); pass a folder you can write to.") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".stateguard-write-probe-", dir=folder)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CommandLineError(f"{prefix} is not writable ({reason}); pass a folder you can write to.") from None
    os.close(fd)
    os.unlink(probe)


def run_command(prog: str, func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """``func(args)`` as an exit code; a :class:`CommandLineError` becomes one line ``PROG: error: ...`` and 2."""
    try:
        return int(func(args) or 0)
    except CommandLineError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _load(ref: str) -> Callable[[argparse._SubParsersAction], None]:
    module_name, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def discover_commands() -> dict[str, Callable[[argparse._SubParsersAction], None] | str]:
    """Name -> ``register`` function (or its ``module:function`` reference, loaded lazily): the installed
    distribution's ``stateguard.commands`` entry points, or, when none is installed, :data:`PYPROJECT`'s (empty when
    neither is there)."""
    commands: dict[str, Callable | str] = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return commands or _source_checkout_commands()


def _source_checkout_commands() -> dict[str, str]:
    """The ``[project.entry-points."stateguard.commands"]`` table of :data:`PYPROJECT` (empty if it is missing)."""
    if not PYPROJECT.is_file():
        return {}
    try:
        import tomllib  # Python >= 3.11
    except ModuleNotFoundError:  # Python 3.10: tomli when installed, else the package must be installed
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            return {}
    with PYPROJECT.open("rb") as fh:
        project = tomllib.load(fh).get("project", {})
    return dict(project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {}))


HELP_ENDS = ".. --help ends here"
"""A line of a command's module docstring after which the rest is for the docs only (process internals)."""

_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def plain_text(text: str | None) -> str | None:
    """``text`` (a docstring) as plain terminal text: what follows a :data:`HELP_ENDS` line dropped, Sphinx roles
    reduced to their target (``:func:`~a.b``` -> ``b``), double backticks and ``**`` removed, ``::`` -> ``:``."""
    if not text:
        return text
    text = text.split(HELP_ENDS, 1)[0].rstrip() + "\n" if HELP_ENDS in text else text

    def target(match: re.Match[str]) -> str:
        name = match.group(1)
        return name.rsplit(".", 1)[-1] if match.group(0).startswith(":") and "`~" in match.group(0) else name

    text = _ROLE.sub(target, text).replace("``", "").replace("**", "")
    return re.sub(r"::$", ":", text, flags=re.MULTILINE)


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """Turn the description and every argument help of ``parser`` and of its sub-parsers into :func:`plain_text`."""
    parser.description = plain_text(parser.description)
    for action in parser._actions:
        if isinstance(action.help, str) and action.help != argparse.SUPPRESS:
            action.help = plain_text(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = plain_text(choice.help)
            for sub in dict.fromkeys(action.choices.values()):
                _plain_help(sub)


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose sub-commands report their own mistyped flags: ``stateguard run --fautls x`` says
    ``stateguard run: error: unrecognized arguments: --fautls x (did you mean --faults?)`` under the usage of
    ``stateguard run`` (plain argparse names only the top-level usage). A mistyped flag is named even when a required
    argument is missing too. Sub-parsers made with ``add_subparsers`` are of this class as well."""

    _seen: list[str] = []

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 - argparse's signature
        self._seen = list(sys.argv[1:] if args is None else args)
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}{self._did_you_mean(extras)}")
        return namespace, extras

    def error(self, message: str) -> NoReturn:
        unknown = [a for a in self._seen if self._unknown_flag(a)]
        if unknown and not message.startswith("unrecognized arguments"):
            message = f"unrecognized arguments: {' '.join(unknown)}{self._did_you_mean(unknown)}; and {message}"
        super().error(message)

    def _unknown_flag(self, arg: str) -> bool:
        name = arg.split("=", 1)[0]
        if not name.startswith("--") or name == "--":
            return False
        return not any(option.startswith(name) for option in self._option_string_actions)

    def _did_you_mean(self, args: Sequence[str]) -> str:
        options = [o for o in self._option_string_actions if o.startswith("--")]
        guesses = {
            name: close[0]
            for arg in args
            if arg.startswith("-")
            and (close := difflib.get_close_matches(name := arg.split("=", 1)[0], options, n=1, cutoff=0.6))
        }
        return " (did you mean " + ", ".join(f"{g}" for g in guesses.values()) + "?)" if guesses else ""


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="stateguard",
        description="StateGuard: train and evaluate a state manager that supervises data-science agents.",
    )
    parser.add_argument("--version", action="version", version=f"stateguard {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = discover_commands()
    if not commands:
        raise CommandLineError(
            f"no sub-commands found: the {ENTRY_POINT_GROUP!r} entry points are not installed and {PYPROJECT} "
            "cannot be read here. Fix: install the package: pip install -e ."
        )
    for name, register in sorted(commands.items()):
        try:
            (_load(register) if isinstance(register, str) else register)(subparsers)
        except ImportError as exc:  # a plugin whose optional dependencies are missing must not break the others
            sub = subparsers.add_parser(name, help=f"(unavailable: {exc})")
            sub.set_defaults(func=lambda _args, _exc=exc, _name=name: _unavailable(_name, _exc))
    _plain_help(parser)
    return parser


def _unavailable(name: str, exc: ImportError) -> int:
    print(f"stateguard {name}: unavailable because an import failed: {exc}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
    except CommandLineError as exc:
        print(f"stateguard: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    # "stateguard tasks grade": the command and its action (the sub-parsers' dest is ``<command>_command``)
    action = next((v for k, v in vars(args).items() if k.endswith("_command") and isinstance(v, str)), None)
    return run_command(" ".join(filter(None, ("stateguard", args.command, action))), args.func, args)


if __name__ == "__main__":
    sys.exit(main())
