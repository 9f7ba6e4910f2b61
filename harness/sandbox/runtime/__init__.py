"""Code that runs *inside* the sandbox: the zygote, the per-episode init process, kernels and checkpoints.

This package is imported by the sandboxed interpreter from a read-only mount, so it may only import the standard
library (and, lazily, numpy/pandas). It must never import ``harness``: the repository is not visible inside.
The host-side code (``harness.sandbox``) imports :mod:`.protocol` from here so both ends share one framing.
"""
