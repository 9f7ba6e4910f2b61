# The README's two commands:
#   make demo   set up from nothing and run the main job on the embedded default
#   make test   set up from nothing and run lint + the test suite
# Every pip install uses constraints.txt, which pins the CPU build of torch (PIP_CONSTRAINT carries it into build
# environments too); DeepSpeed is installed without compiled ops (DS_BUILD_OPS=0: its CPU paths and config parser).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
EXTRAS ?= dev,train,deepspeed,serving,ray,tracking
STAMP  := $(VENV)/.stamp-$(EXTRAS)
PYTEST_ARGS ?=
DEMO_OUT ?= runs/demo

.PHONY: demo test lint bench sysdeps browser venv clean

demo: sysdeps $(STAMP)
	$(BIN)/stateguard pipeline --config configs/pipeline/demo.yaml --out $(DEMO_OUT)

test: sysdeps browser $(STAMP) lint
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (exit 5); a run that checks nothing fails." >&2; fi; \
	exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: sysdeps $(STAMP)
	$(BIN)/python scripts/bench_sandbox.py

venv: $(STAMP)

# System packages: bubblewrap isolates the sandbox. Installed with apt when missing and we are root;
# otherwise say how to install it (the sandbox then refuses to run unless configured with isolation: none).
sysdeps:
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing bubblewrap (apt-get)"; \
		apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null; }; \
	else echo "WARNING: bubblewrap (bwrap) is missing; install it: sudo apt-get install bubblewrap" >&2; fi

# Chromium (headless) renders the episode viewer's pages in tests/harness/viewer; only `make test` needs it.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium (apt-get; the episode viewer's browser tests)"; \
		apt-get install -y -q chromium >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; \
	else echo "WARNING: chromium is missing (tests/harness/viewer fail without it); install it: sudo apt-get install chromium" >&2; fi

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	DS_BUILD_OPS=0 PIP_CONSTRAINT=$(CURDIR)/constraints.txt $(PIP) install -q -c constraints.txt -e ".[$(EXTRAS)]"
	touch $@

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache runs
