"""A wheel install of the project keeps the built-in tasks' private answers out of the sandbox.

The wheel ships ``harness/builtin_tasks/*/private`` inside ``site-packages``, and the sandbox mounts the venv: the
test builds the wheel, installs it into a fresh venv (no network) and runs, in that venv, a sandboxed cell that walks
``/`` (``/proc`` and ``/sys`` skipped): no path may name ``builtin_tasks`` and no file up to 1 MiB may hold an answer
of ``retail-sales`` (the contents of ``/usr`` and of the base interpreter, which hold no copy of the project here, are
not read). About 5 s."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from harness.sandbox.sandbox import PROJECT_PACKAGES, hidden_dirs

ROOT = Path(__file__).resolve().parents[3]
NEEDLE = "26592.76"  # West's revenue in retail-sales/private/reference.json, in no other shipped file

SEARCH = textwrap.dedent(
    """
    import os
    found = []
    for top, dirs, files in os.walk('/'):
        if top == '/':
            dirs[:] = [d for d in dirs if d not in ('proc', 'sys')]
        for name in files:
            path = os.path.join(top, name)
            if 'builtin_tasks' in path:
                found.append(path)
            if path.startswith(SYSTEM) or os.path.islink(path):
                continue
            try:
                if os.path.isfile(path) and os.path.getsize(path) <= 1 << 20:
                    with open(path, 'rb') as fh:
                        if NEEDLE.encode() in fh.read():
                            found.append(path)
            except OSError:
                pass
    print_result({'found': found})
    """
)

RUN = textwrap.dedent(
    """
    import json, sys, harness
    from harness.sandbox import Sandbox, SandboxConfig
    config = SandboxConfig(isolation='bwrap', preload=[], cell_timeout_s=120, grace_s=5, extra_ro_binds=[sys.argv[3]])
    with Sandbox(config) as sandbox:
        result = sandbox.execute_once(sys.argv[1], sys.argv[2])
    print(json.dumps({'harness': harness.__file__, 'ok': result.ok, 'error': result.error_message,
                      'results': result.results}))
    """
)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_a_wheel_install_shows_no_private_answer_inside_the_sandbox(tmp_path):
    source, dist, venv = tmp_path / "source", tmp_path / "dist", tmp_path / "venv"
    for name in PROJECT_PACKAGES:  # built from a copy, so that the checkout gets no build/ folder
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = [sys.executable, "-m", "pip"]
    run = functools.partial(subprocess.run, cwd=tmp_path, env=env, check=True)
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, source])
    run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", venv])
    python = venv / "bin" / "python"
    run([*pip, "--python", python, "install", "--no-deps", "--no-index", "-q", next(dist.glob("*.whl"))])
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "shared-venv.pth").write_text(sysconfig.get_path("purelib") + "\n")  # the dependencies (yaml)
    shipped = site / "harness" / "builtin_tasks" / "retail-sales" / "private" / "reference.json"
    assert NEEDLE in shipped.read_text()  # the wheel does ship the answers into the mounted venv
    public = tmp_path / "public"
    public.mkdir()
    system = ("/usr/", f"{sys.base_prefix}/")  # names only: read 170,000 files there and the test takes 30 s
    code = f"NEEDLE, SYSTEM = {NEEDLE!r}, {system!r}\n{SEARCH}"
    out = subprocess.run(
        [python, "-c", RUN, code, public, sysconfig.get_path("purelib")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["harness"].startswith(str(site))  # the wheel's copy ran, not this checkout
    assert report["ok"], report["error"]
    assert report["results"] == [{"found": []}]


def test_the_project_packages_inside_a_mounted_folder_are_hidden(tmp_path):
    packages = [str(ROOT / name) for name in ("envs", "harness", "rewards", "synthesis", "training")]
    assert hidden_dirs([str(ROOT)]) == packages  # e.g. a site-packages holding an installed copy
    assert hidden_dirs([str(tmp_path), "/usr"]) == []  # a checkout outside every mounted folder: nothing to hide
