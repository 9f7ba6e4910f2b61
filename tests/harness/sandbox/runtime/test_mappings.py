"""Shared mappings made private (what a probe's fork does before its code runs)."""

from __future__ import annotations

import mmap
import os

from harness.sandbox.runtime import mappings


def test_shared_mappings_are_listed_alike_by_ioctl_and_by_parsing_and_made_private(tmp_path):
    path = tmp_path / "shared.bin"
    path.write_bytes(b"0" * 16)
    with open(path, "r+b") as fh:
        anon, file_map = mmap.mmap(-1, 16), mmap.mmap(fh.fileno(), 16)
        anon[:2] = b"hi"
        listed = mappings.shared_mappings()
        with open("/proc/self/maps", "rb") as maps:
            assert mappings._parse_shared(maps.read()) == listed
        assert {m[6] for m in listed} >= {str(path), "/dev/zero (deleted)"}
        pid = os.fork()
        if pid == 0:  # the child writes through both mappings after making them private
            code = 1
            try:
                mappings.privatize_shared()
                anon[:2], file_map[:1] = b"XX", b"X"
                code = 0 if mappings.shared_mappings() == [] and anon[:2] == b"XX" else 1
            finally:
                os._exit(code)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        assert anon[:2] == b"hi" and file_map[:1] == b"0" and path.read_bytes() == b"0" * 16
