"""StateGuard harness: task contracts (data layer), sandboxed stateful interpreter (execution layer),
graders and metrics (evaluation layer), the state-manager runtime, the chat backends, and the wire format the higher
layers train on: the Qwen3 tokenizer and the project's chat template (``harness.tokenizer``,
``harness/chat_template.jinja``).

The harness is the lowest layer (harness < rewards < synthesis < envs < training) and never imports a higher one;
``tests/test_layers.py`` checks every import.
"""

__version__ = "0.1.0"
