"""StateGuard harness: task contracts (data layer), sandboxed stateful interpreter (execution layer),
graders and metrics (evaluation layer), and the state-manager runtime.

The harness never imports from ``training`` or ``synthesis`` (dependencies point one way).
"""

__version__ = "0.1.0"
