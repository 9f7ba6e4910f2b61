"""Importers: turn an external benchmark into StateGuard task folders (``stateguard tasks import KIND ...``).

Each importer is ``fn(options: ImportOptions) -> ImportReport``; :data:`IMPORTERS` maps the KIND to it. Importers
write valid task folders (each is loaded and validated after writing), never overwrite an existing non-empty task
folder without ``overwrite`` (and never delete a folder that is not a task folder), never touch anything outside
``out`` (every task id is checked to be a safe folder name before the first file-system change:
:func:`~harness.tasks.importers.common.check_outputs`), and show a progress bar when they write many tasks.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.registry import lookup
from harness.tasks.importers.common import ImporterError, ImportOptions, ImportReport
from harness.tasks.importers.dabench import import_dabench
from harness.tasks.importers.dabstep import import_dabstep
from harness.tasks.importers.longds import import_longds
from harness.tasks.importers.mlebench import import_mlebench

Importer = Callable[[ImportOptions], ImportReport]

IMPORTERS: dict[str, Importer] = {
    "dabench": import_dabench,
    "longds": import_longds,
    "dabstep": import_dabstep,
    "mlebench": import_mlebench,
}
"""KIND -> importer."""


def get_importer(kind: str) -> Importer:
    """The importer for ``kind``; an unknown kind raises ``ValueError`` listing the valid ones."""
    return lookup(IMPORTERS, kind, what="import kind")


def run_import(kind: str, options: ImportOptions) -> ImportReport:
    """Run the importer for ``kind``."""
    return get_importer(kind)(options)


__all__ = ["IMPORTERS", "ImportOptions", "ImportReport", "ImporterError", "get_importer", "run_import"]
