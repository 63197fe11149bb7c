# EchelonFlow on programmable switches — one Makefile for every role.
#   make run    the end-to-end demo (BMv2 if installed, else the embedded soft switch)
#   make test   every test: lint, types, unit, integration, PTF on the soft switch (and BMv2 if installed), headless demo
#   make test-fast  unit tests only (no root, nothing marked slow): under a minute
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
RAY_STAMP := $(VENV)/.installed-ray
TARGET  ?= auto
TOPO    ?= topo/star.yaml
JOBS    ?= topo/jobs/pipe.yaml topo/jobs/dp.yaml topo/jobs/big.yaml
POLICIES ?= echelon-online,echelon,coflow,fifo
# tshark: the echelon dissector's test (tools/wireshark/); iputils-ping: `ping` in the Mininet CLI.
APT_PKGS := mininet iproute2 ethtool tcpdump tshark iputils-ping
P4C     := $(shell command -v p4c-bm2-ss 2>/dev/null)

# Python's default is to cache compiled modules in __pycache__/; some CI sandboxes turn it
# off (PYTHONDONTWRITEBYTECODE=1), and then every pytest worker and every process a test
# starts compiles the same ~250 modules again, and pytest re-rewrites every test module's
# asserts (on a slow 2-core VM `make test-fast` took 63 s without the cache, 54 s with it:
# docs/conventions.md).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: help deps venv venv-ray p4 run interleave test test-fast test-unit test-root lint typecheck fmt bench eval ptf clean p4rt-shell p4rt-shell-venv

help:
	@echo "make run      end-to-end demo on the emulated network (TARGET=auto|soft|bmv2, TOPO=...,"
	@echo "              JOBS=\"a.yaml b.yaml\" your own job files, POLICIES=echelon,coflow,fifo,"
	@echo "              (any of echelon list's, module:Class, NAME-online; docs/policies.md),"
	@echo "              RUN_ARGS=\"--scale 0.01\" or \"--budget 60\" (job size), PCAP=1 per-port pcaps,"
	@echo "              TRACE=1 each switch's packet-trace log (run/latest/logs/<switch>-trace.txt),"
	@echo "              CLI=1|during|after Mininet CLI before/during/after traffic)"
	@echo "make interleave  compatible/incompatible jobs in steady state, every policy, vs alone"
	@echo "              (SCENARIO=compatible-2|compatible-3|incompatible-2, TARGET=..., RUN_ARGS=...)"
	@echo "make test     lint, type check and every test (what CI runs)"
	@echo "make test-fast  unit tests only: no root, nothing marked slow (under a minute)"
	@echo "make ptf      PTF suite (TARGET=soft|bmv2)"
	@echo "make bench    scheduler, soft switch and controller benchmarks"
	@echo "make eval     simulator evaluation report -> docs/evaluation.md (EVAL_ARGS=--ray-address auto)"
	@echo "make venv-ray add the optional Ray backend of simulator sweeps (requirements-ray.txt)"
	@echo "make p4       compile p4src/ with p4c (or use the committed build outputs)"
	@echo "make p4rt-shell  p4runtime-shell attached to a running switch (GRPC=127.0.0.1:50001, the port topo/star.yaml gives s1)"

# System packages: Mininet's mnexec, iproute2/tc, ethtool, tshark, ping. Installed only when
# missing, without questions: wireshark-common's "non-root capture?" is preseeded to no.
deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "error: need root to apt-get install$$missing" >&2; exit 2; fi; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    -o DPkg::Lock::Timeout=120 --no-install-recommends $$missing; \
	fi

venv: $(STAMP)
$(STAMP): requirements.txt pyproject.toml
	@command -v python3 >/dev/null || { echo "error: python3 is required" >&2; exit 2; }
	@python3 -c 'import venv, ensurepip' 2>/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; }
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements.txt
	$(VENV)/bin/pip install -q --no-deps -e .
	@touch $@

# p4runtime-shell pins protobuf < 3.21: it gets its own venv, never the main one.
P4RT_VENV     ?= .venv-p4rt-shell
GRPC          ?= 127.0.0.1:50001
P4RT_ELECTION ?= 0,2
p4rt-shell-venv: $(P4RT_VENV)/.installed
$(P4RT_VENV)/.installed: requirements-p4rt-shell.txt
	python3 -m venv $(P4RT_VENV)
	$(P4RT_VENV)/bin/pip install -q --upgrade pip
	$(P4RT_VENV)/bin/pip install -q -r requirements-p4rt-shell.txt
	@touch $@

# Attach to the running switch (device 0) without pushing a pipeline: the shell reads
# the P4Info from the switch. Election ID 0,2 is above the controller's default 0,1,
# so the shell may write and the controller is backup until the shell exits.
p4rt-shell: p4rt-shell-venv
	$(P4RT_VENV)/bin/python -m p4runtime_sh --grpc-addr $(GRPC) --device-id 0 --election-id $(P4RT_ELECTION)

# Optional Ray backend of simulator sweeps (--ray-address); the tests need it, `make run` does not.
venv-ray: $(RAY_STAMP)
$(RAY_STAMP): $(STAMP) requirements-ray.txt
	$(VENV)/bin/pip install -q -r requirements-ray.txt
	@touch $@

# The P4 program is the single source: p4c's BMv2 JSON and P4Info are committed in
# p4src/build/ (tests/p4/test_p4_build.py checks they are what p4c makes of p4src/);
# the differential test's programs (tests/p4/programs/) next to them in build/
# (tests/p4/programs/public/fetch.py downloads and compiles the public ones).
P4C_FLAGS := --arch v1model --std p4-16
p4:
ifeq ($(P4C),)
	@echo "p4c-bm2-ss not found: using the committed outputs in p4src/build/ (see p4src/build/README)"
else
	$(P4C) $(P4C_FLAGS) --p4runtime-files p4src/build/echelon.p4info.txtpb -o p4src/build/echelon.json p4src/echelon.p4
	@for f in tests/p4/programs/*.p4; do \
	  b=$$(dirname $$f)/build/$$(basename $$f .p4); echo "p4c $$f"; \
	  $(P4C) $(P4C_FLAGS) --p4runtime-files $$b.p4info.txtpb -o $$b.json $$f || exit 1; \
	done
endif

# The demo: three jobs whose best order at h4's port changes as groups come and go, under
# the controller's online re-planning, its static plan, coflow and FIFO (docs/demo.md).
# JOBS="a.yaml b.yaml": play your own job files instead (topo.run --jobs);
# POLICIES=echelon,coflow,fifo: other policies (topo.run --policies; package.module:Class
# with its folder on PYTHONPATH, NAME-online re-planned online: docs/policies.md).
# Each run writes run/<timestamp>/ (run/latest points at it); exit 1: incomplete results.
# PCAP=1: per-port pcaps of every switch in run/latest/pcap/<switch>/ and per-port counts;
# TRACE=1: each switch's per-packet trace log in run/latest/logs/<switch>-trace.txt;
# CLI=1 (= before) | during | after: when the Mininet CLI opens (docs/demo.md).
EMPTY :=
SPACE := $(EMPTY) $(EMPTY)
COMMA := ,
RUN_FLAGS := $(if $(filter-out 0,$(PCAP)),--pcap) \
  $(if $(filter-out 0,$(TRACE)),--packet-trace) \
  $(if $(filter-out 0,$(CLI)),--cli $(if $(filter 1,$(CLI)),before,$(CLI))) \
  --jobs "$(subst $(SPACE),$(COMMA),$(strip $(JOBS)))" --policies "$(POLICIES)"
run: deps venv p4
	$(PY) -m topo.run --topo $(TOPO) --target $(TARGET) $(RUN_FLAGS) $(RUN_ARGS)

# The simulator's interleaving scenarios in steady state on the emulated network: each
# job alone, then fair and every built-in policy (docs/demo.md, "Interleaving").
# SCENARIO=compatible-2|compatible-3|incompatible-2; RUN_ARGS="--policies fair,echelon".
SCENARIO ?= compatible-2
interleave: deps venv p4
	$(PY) -m topo.run --scenario $(SCENARIO) --target $(TARGET) --headless $(RUN_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: venv
	$(VENV)/bin/mypy

# Unit tests: no root, nothing marked slow (> ~1 s: processes, long computations), so no
# Ray either (its tests are slow). What to run after every edit.
test-fast: venv
	$(VENV)/bin/pytest -q -n auto -m "not root and not slow" tests

test-unit: venv venv-ray
	$(VENV)/bin/pytest -q -m "not root" tests

# Tests that need root: real switch processes on veth pairs, the PTF suite, the headless demo.
test-root: deps venv
	$(VENV)/bin/pytest -q -m root tests

# Root tests first, one at a time: they share switches' ports and namespaces, and the
# emulation's timing checks want a machine not yet worn by the rest (on a throttled VM they
# failed after it: docs/measurements/demo.md). Then the tests without root on every core, a
# file's tests on one worker (module fixtures such as sim.eval's tiny report computed once).
test: deps venv venv-ray lint typecheck
	@command -v simple_switch_grpc >/dev/null && echo "BMv2 found: PTF runs on the soft switch and on BMv2" \
	  || echo "BMv2 (simple_switch_grpc) not installed: PTF runs on the soft switch only"
	@command -v p4c-bm2-ss >/dev/null && $(PY) tests/p4/programs/public/fetch.py >/dev/null \
	  || echo "public v1model programs not fetched (network, p4c): their differential tests skip"
	$(VENV)/bin/pytest -q -ra -m root tests
	$(VENV)/bin/pytest -q -ra -n auto --dist loadfile -m "not root" tests

ptf: deps venv
	$(PY) -m ptf_tests.run --target $(TARGET)

bench: venv
	$(PY) -m bench.scheduler
	$(PY) -m bench.softswitch
	$(PY) -m bench.controller

eval: venv
	$(PY) -m sim.eval $(EVAL_ARGS)

fmt: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf run/ .pytest_cache .mypy_cache .ruff_cache $(P4RT_VENV)
