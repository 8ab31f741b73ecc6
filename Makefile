# The two commands a fresh machine needs are `make demo` and `make test`.
# Both create the virtualenv and install what they need.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# the pure layers, the faust adapters and the ad policy's pure modules: mypy --strict
# (pyproject.toml)
STRICT := streamjoin/assignment streamjoin/membership streamjoin/join streamjoin/restore streamjoin/lifecycle \
	streamjoin/faust \
	streamjoin/errors.py streamjoin/_lazy.py streamjoin/_gc.py streamjoin/_histogram.py streamjoin/_stacks.py streamjoin/partitioner.py streamjoin/ads/policy.py \
	streamjoin/ads/attribution.py streamjoin/ads/events.py streamjoin/ads/campaigns.py streamjoin/ads/chunks.py streamjoin/ads/clicks.py streamjoin/ads/impressions.py streamjoin/ads/keys.py streamjoin/ads/topics.py \
	streamjoin/ads/generator/core.py streamjoin/ads/generator/config.py

.PHONY: test demo lint typecheck unit bench bench-restore bench-join bench-rebalance clean test-faust-compat test-faults prometheus

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

DEMO_STAMP := $(VENV)/.installed-demo

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[demo]'
	touch $(DEMO_STAMP)

# The main job: the ad-monetization pipeline on the embedded broker and local Spark.
demo: $(DEMO_STAMP)
	$(BIN)/streamjoin demo --out demo-out --force

lint: $(STAMP)
	$(BIN)/ruff check streamjoin tests benchmarks examples
	$(BIN)/mypy $(STRICT)

# A real Prometheus and promtool for the monitoring tests (and for development):
# Debian's prometheus package, downloaded with apt-get and unpacked with dpkg -x,
# without root and without a service, into $(VENV)/prometheus (usr/bin/prometheus,
# usr/bin/promtool; tests/prometheus_bin.py finds them there).
PROMETHEUS_STAMP := $(VENV)/.installed-prometheus

$(PROMETHEUS_STAMP): tests/install-prometheus.sh | $(BIN)/python
	bash tests/install-prometheus.sh $(VENV)/prometheus
	touch $(PROMETHEUS_STAMP)

# the same, run again (it does nothing when both binaries work)
prometheus: | $(BIN)/python
	bash tests/install-prometheus.sh $(VENV)/prometheus
	touch $(PROMETHEUS_STAMP)

# every test, then faust-streaming's own tests with streamjoin's classes swapped in
test: lint $(PROMETHEUS_STAMP)
	$(BIN)/pytest -m "not faults"
	$(BIN)/python tests/faust_compat/faust_compat_run.py

unit: $(STAMP)
	$(BIN)/pytest tests/unit

# faust-streaming's own tests (from its sdist, downloaded into $(VENV)/faust-src on
# first use) run with faust's assignor and table manager, then with streamjoin's;
# fails when a test passes with faust's classes and not with ours. Also run by `make test`.
test-faust-compat: $(STAMP)
	$(BIN)/python tests/faust_compat/faust_compat_run.py

# the frozen-worker test again and again, each run with its own schedule of freezes
# (FREEZE_SEEDS: the seeds; it stops at the first failure and names its seed)
FREEZE_SEEDS ?= 1 2 3 4 5 6 7 8 9 10
test-faults: $(STAMP)
	$(BIN)/pytest -m faults
	@for seed in $(FREEZE_SEEDS); do \
		echo "frozen-worker run, seed $$seed"; \
		SJ_FREEZE_SEED=$$seed $(BIN)/pytest -q tests/integration/test_frozen_worker.py \
			|| { echo "failed with SJ_FREEZE_SEED=$$seed"; exit 1; }; \
	done

bench: $(STAMP)
	$(BIN)/python -m benchmarks.assignor
	$(BIN)/python -m benchmarks.assignor.churn

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

bench-restore: $(STAMP)
	$(BIN)/python -m benchmarks.restore

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): pyproject.toml | $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	touch $(BENCH_STAMP)

# the join benchmark's Quix Streams pass needs the bench extra
bench-join: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python -m benchmarks.join

bench-rebalance: $(STAMP)
	$(BIN)/python -m benchmarks.rebalance
