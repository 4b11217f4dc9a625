# karpy developer entry points. Others add their targets below; keep recipes one command each.
PYTHON ?= .venv/bin/python

.PHONY: test venv build-cluster cluster-up cluster-down cluster-status

# All tests: unit, integration on the local control plane + moto, property and fuzz tests.
test: venv build-cluster promtool monitoring-crds image
	.venv/bin/pytest tests

# The project's Python environment (re-created when pyproject.toml changes).
venv: .venv/.installed
.venv/.installed: pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q -e '.[dev]'
	touch $@

# Go builds of etcd, kube-apiserver/-controller-manager/-scheduler, kubectl and kwok into ~/.cache/karpy (once).
build-cluster: venv
	$(PYTHON) -m hack.localcluster.build

# The local proving ground on 127.0.0.1; run folder $${KARPY_RUN_DIR:-.run/cluster}.
cluster-up: build-cluster
	$(PYTHON) -m hack.localcluster.cluster up

cluster-down:
	$(PYTHON) -m hack.localcluster.cluster down

cluster-status:
	$(PYTHON) -m hack.localcluster.cluster status

# --- shipping: the demo and the Helm CLI (owner: issue 7) ---
.PHONY: demo demo-down helm

# Karpenter's getting-started walkthrough against karpy on the local control plane (hack/demo.py).
# KEEP=1 leaves the cluster and karpy running and prints the kubeconfig; `make demo-down` stops them.
demo: venv build-cluster
	$(PYTHON) -m hack.demo $(if $(KEEP),--keep)

demo-down: venv
	$(PYTHON) -m hack.demo down

# The Helm CLI built from the Go module proxy into ~/.cache/karpy (hack/helm.py); prints its path.
helm: venv
	$(PYTHON) -m hack.helm

# --- monitoring: the live-metrics test's tools (owner: issue 26) ---
.PHONY: promtool monitoring-crds

# promtool and promql-selectors built from github.com/prometheus/prometheus into ~/.cache/karpy (hack/promql.py).
promtool: venv
	$(PYTHON) -m hack.promql

# The Prometheus Operator's ServiceMonitor/PodMonitor/PrometheusRule CRDs from its Go module (hack/monitoring_crds.py).
monitoring-crds: venv
	$(PYTHON) -m hack.monitoring_crds

# --- the container image (owner: issue 32) ---
.PHONY: image

# karpy's image with docker, podman or buildah (whichever is here; hack/image.py), from the registry's
# python:3.11-slim-bookworm or, without registry access, a debootstrap bookworm base; cached in ~/.cache/karpy/image.
image: venv
	$(PYTHON) -m hack.image
