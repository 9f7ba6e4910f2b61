"""parse_python: ast.parse under one process-wide lock (CPython 3.11 races two threads' tree conversions)."""

import ast
import threading

from harness import pyast
from harness.pyast import parse_python


def test_it_parses_like_ast_parse_and_waits_for_a_parse_in_another_thread():
    source = "total = sales.groupby('region')['revenue'].sum()\n"
    assert ast.dump(parse_python(source)) == ast.dump(ast.parse(source))
    assert isinstance(parse_python("x + 1", mode="eval"), ast.Expression)
    done = threading.Event()
    with pyast._LOCK:  # another parse holds the lock: this thread's parse waits for it
        thread = threading.Thread(target=lambda: (parse_python(source), done.set()))
        thread.start()
        assert not done.wait(0.2)
        with pyast._LOCK:  # re-entrant: a parse inside a parse (e.g. from a finalizer) does not deadlock
            parse_python(source)
    thread.join(10)
    assert done.is_set()
