# gauntlet — every entry point. docs/make.md documents each target and variable.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

K8S_VERSION    ?= $(shell hack/k8s-module.sh --newest)
GAUNTLET_CACHE ?= $(HOME)/.cache/gauntlet
K8S_BIN        := $(GAUNTLET_CACHE)/k8s/$(K8S_VERSION)/bin
OUTPUT         := _output
VERSION        ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.1.0-dev)
MODULES        := operator scenarios e2e bench
# Every package but the e2e suites, which run through gauntlet-e2e (make e2e, make test).
UNIT_PACKAGES  := $(foreach m,$(filter-out e2e,$(MODULES)),./$(m)/...)
FUZZTIME       ?= 60s
CONTROLLER_GEN := cd operator && go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
CHART_FILES    := charts/dynamo-operator/files

export GAUNTLET_CACHE
export KUBEBUILDER_ASSETS := $(K8S_BIN)

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build the operator binary into _output/bin/dynamo-operator.
	go build -ldflags "-X github.com/gauntlet-dev/gauntlet/operator/internal/version.Version=$(VERSION)" \
	  -o $(OUTPUT)/bin/dynamo-operator ./operator/cmd/dynamo-operator
	@echo "✓ $(OUTPUT)/bin/dynamo-operator ($(VERSION))"

.PHONY: generate
generate: ## Regenerate deepcopy code, CRDs and webhook manifests with controller-gen.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./api/... output:crd:dir=../$(CHART_FILES)/crds
	$(CONTROLLER_GEN) webhook paths=./internal/webhook/... output:webhook:dir=../$(CHART_FILES)/webhook

# golangci-lint is pinned by hack/tools/golangci-lint/go.mod and built once into
# $(GAUNTLET_CACHE)/tools/golangci-lint-<version>; .golangci.yml lists the linters.
GOLANGCI_LINT_ARGS ?=

.PHONY: lint
lint: ## gofmt, golangci-lint per module (.golangci.yml; GOLANGCI_LINT_ARGS), and a check that generated files are up to date.
	@LINT_MODULES="$(MODULES)" GOLANGCI_LINT_ARGS="$(GOLANGCI_LINT_ARGS)" hack/lint.sh

.PHONY: control-plane
control-plane: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwokctl into the cache.
	@K8S_VERSION=$(K8S_VERSION) hack/control-plane.sh >/dev/null
	@hack/local-binaries.sh >/dev/null

# Offline kind node images (kind/README.md): built from the module proxy and Debian packages,
# cached by recipe hash. kind-host-* handle the `docker run --privileged` quirk of some hosts.
.PHONY: kind-node-image kind-host-check kind-host-setup kind-host-restore
kind-node-image: ## Build the offline kind node image for K8S_VERSION (cached; prints gauntlet.local/kind-node:<version>-<hash>).
	@K8S_VERSION=$(K8S_VERSION) hack/kind-node-image.sh

kind-host-check: ## Check that `docker run --privileged` (kind's nodes) works on this host; says how to fix it if not.
	@hack/kind-host.sh check

kind-host-setup: ## Make privileged containers work here: runc wrapper as Docker's default runtime (root, reversible).
	@hack/kind-host.sh setup

kind-host-restore: ## Undo kind-host-setup: /etc/docker/daemon.json back byte for byte, wrapper removed.
	@hack/kind-host.sh restore

PROVIDER      ?= local
CLUSTER       ?= gauntlet
CLUSTER_FLAGS ?=
CLUSTER_CLI   := $(OUTPUT)/bin/gauntlet-cluster

.PHONY: cluster-cli
cluster-cli:
	@go build -o $(CLUSTER_CLI) ./scenarios/tools/cmd/gauntlet-cluster

.PHONY: cluster-up
cluster-up: control-plane cluster-cli ## Create cluster CLUSTER with PROVIDER (local|kind; existing: check KUBECONFIG's; CLUSTER_FLAGS: --cert-manager, --config=FILE, --no-node).
	@$(CLUSTER_CLI) up --provider $(PROVIDER) --name $(CLUSTER) $(CLUSTER_FLAGS)

.PHONY: cluster-down
cluster-down: cluster-cli ## Delete cluster CLUSTER of PROVIDER; fails if anything of it is left.
	@$(CLUSTER_CLI) down --provider $(PROVIDER) --name $(CLUSTER)

.PHONY: cluster-load
cluster-load: cluster-cli ## Copy the Docker image IMAGE into the nodes of kind cluster CLUSTER (PROVIDER=kind).
	@$(CLUSTER_CLI) load --provider $(PROVIDER) --name $(CLUSTER) $(IMAGE)

.PHONY: cluster-logs
cluster-logs: cluster-cli ## Export CLUSTER's logs to _output/cluster-logs/CLUSTER.
	@$(CLUSTER_CLI) logs --provider $(PROVIDER) --name $(CLUSTER) --dest $(OUTPUT)/cluster-logs/$(CLUSTER)

.PHONY: test
test: lint control-plane kind-host-check kind-node-image ## Lint, every module's tests (unit, envtest, chart), every e2e suite on local beside the W checks against Gatekeeper (E2E_JOBS at once), suite autocert on kind, a short fuzz run.
	@mkdir -p $(OUTPUT)/test
	@echo "• go test ($(UNIT_PACKAGES)); full log: $(OUTPUT)/test/go-test.log"
	@go test -count=1 -v -timeout 30m $(UNIT_PACKAGES) 2>&1 | tee $(OUTPUT)/test/go-test.log | hack/test-summary.sh
	@echo "• every e2e suite on local, and the webhook contract against Gatekeeper in each of its modes beside them (its binaries built from its module once, then cached); reports: $(OUTPUT)/test/e2e, $(OUTPUT)/test/conformance"
	@rm -rf $(OUTPUT)/test/e2e; failed=0; \
	go build -o $(E2E_RUNNER) ./scenarios/tools/cmd/gauntlet-e2e || exit 2; \
	$(E2E_RUNNER) -suites "$(E2E_SUITES)" -targets gatekeeper -targets-out $(OUTPUT)/test/conformance -jobs "$(E2E_JOBS)" \
	  -provider local -kubernetes-version $(K8S_VERSION) -timeout $(E2E_TIMEOUT) -out $(OUTPUT)/test/e2e \
	  -times $(GAUNTLET_CACHE)/e2e/suite-times-test-local.json \
	  -- --provider=local --kubernetes-version=$(K8S_VERSION) --operator-version=$(VERSION) --e2e-output=$(CURDIR)/$(OUTPUT)/test/e2e || failed=$$?; \
	[ $$failed -ne 2 ] || exit 2; \
	go run ./scenarios/tools/cmd/e2e-summary -dir $(OUTPUT)/test/e2e || failed=1; \
	exit $$failed
	@echo "• e2e suite autocert on kind (node image built or cached first); full log: $(OUTPUT)/test/e2e-kind.log"
	@go test -count=1 -v -timeout 45m ./e2e/autocert -args --provider=kind --e2e-output=$(CURDIR)/$(OUTPUT)/test/e2e-kind \
	  2>&1 | tee $(OUTPUT)/test/e2e-kind.log | hack/test-summary.sh
	@$(MAKE) --no-print-directory fuzz FUZZTIME=5s

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 60s; make test uses 5s); logs and inputs: _output/fuzz/.
	@go run ./scenarios/tools/cmd/gauntlet-fuzz -fuzztime $(FUZZTIME) -out $(OUTPUT)/fuzz

# End-to-end suites: one directory per suite under e2e/ (a TestMain built on scenarios/framework/suite).
# PROVIDER (local|kind|existing), K8S_VERSION, LABELS (e2e-framework --labels, e.g. scenario=C1),
# KEEP_CLUSTER=1 (keep the cluster and reuse it next run). Reports: _output/e2e/<suite>/.
# COVER=1 runs a coverage-instrumented operator (local provider) and, in `make e2e`, ends with
# the operator's coverage from the suites and from its own tests: _output/coverage/.
# STRESS=N runs each suite beside N CPU-bound worker processes the suite starts itself (--stress).
# E2E_JOBS=N: `make e2e` runs N suites at once, each its own go test and cluster (default: what
# the machine holds — local cores+1, kind cores/2, within free memory and inotify limits; it
# checks an explicit N first). scenarios/tools/cmd/gauntlet-e2e does it; each log: _output/e2e/<suite>/go-test.log.
# FAILOVER_PLAN: how thoroughly `make e2e-multi-operator` measures failover — full (default),
# quick (what make test runs) or compare (P5's kinds at once and one after another, compared).
# E2E_TIMEOUT: go test's -timeout for each suite (and each target mode) run; a suite over it is
# stopped with a stack dump and no summary.
LABELS       ?=
FAILOVER_PLAN ?= full
KEEP_CLUSTER ?=
COVER        ?=
STRESS       ?=
E2E_JOBS     ?=
E2E_OUTPUT   := $(OUTPUT)/e2e
E2E_RUNNER   := $(OUTPUT)/bin/gauntlet-e2e
E2E_TIMEOUT  ?= 30m
COVER_OUTPUT := $(OUTPUT)/coverage
E2E_ALL      := $(patsubst e2e/%/,%,$(dir $(wildcard e2e/*/main_test.go)))
# A suite with no recorded time on this machine (a fresh machine, CI) starts in E2E_SUITES' order:
# the longest first as make e2e's full plan ran on a 2-core VM (2026-11-30), then the others.
E2E_LONGEST  := multioperator conformance autocert troubleshooting
E2E_SUITES   := $(filter $(E2E_ALL),$(E2E_LONGEST)) $(filter-out $(E2E_LONGEST),$(E2E_ALL))
E2E_ARGS      = --provider=$(PROVIDER) --kubernetes-version=$(K8S_VERSION) --operator-version=$(VERSION) \
                --keep-cluster=$(if $(filter 1,$(KEEP_CLUSTER)),true,false) --e2e-output=$(CURDIR)/$(E2E_OUTPUT) \
                $(if $(LABELS),--labels=$(LABELS)) \
                $(if $(filter 1,$(COVER)),--cover-dir=$(CURDIR)/$(COVER_OUTPUT)/e2e) \
                $(if $(STRESS),--stress=$(STRESS))
E2E_TEST      = go test -count=1 -v -timeout $(E2E_TIMEOUT)

.PHONY: e2e
e2e: control-plane ## Every suite under e2e/, E2E_JOBS at once (default: what the machine holds; PROVIDER, K8S_VERSION, LABELS, KEEP_CLUSTER=1, COVER=1, STRESS=N), then one table of all scenarios.
	@rm -rf $(E2E_OUTPUT) $(if $(filter 1,$(COVER)),$(COVER_OUTPUT)); failed=0; \
	go build -o $(E2E_RUNNER) ./scenarios/tools/cmd/gauntlet-e2e || exit 2; \
	GAUNTLET_FAILOVER_PLAN=full $(E2E_RUNNER) -suites "$(E2E_SUITES)" -jobs "$(E2E_JOBS)" -provider $(PROVIDER) \
	  -kubernetes-version $(K8S_VERSION) -timeout $(E2E_TIMEOUT) -out $(E2E_OUTPUT) -- $(E2E_ARGS) || failed=$$?; \
	[ $$failed -ne 2 ] || exit 2; \
	$(if $(filter 1,$(COVER)),$(MAKE) --no-print-directory coverage-report || failed=1;) \
	go run ./scenarios/tools/cmd/e2e-summary -dir $(E2E_OUTPUT) $(if $(filter 1,$(COVER)),-coverage $(COVER_OUTPUT)) || failed=1; \
	exit $$failed

# The webhook contract (W checks, suite e2e/conformance) against a target: an operator described
# under scenarios/targets/<name>/target.yaml (docs/targets.md), once per certificate mode it
# declares, CONFORMANCE_JOBS modes at once. PROVIDER, K8S_VERSION, LABELS, KEEP_CLUSTER as above.
TARGET           ?= gauntlet
CONFORMANCE_JOBS ?= 1

.PHONY: e2e-conformance
e2e-conformance: control-plane ## The W checks against TARGET (a name under scenarios/targets or a path; several separated by spaces; all: every one; default gauntlet) in every certificate mode it declares: _output/conformance/<target>/report.md.
	@go run ./scenarios/tools/cmd/gauntlet-conformance -target "$(TARGET)" -jobs $(CONFORMANCE_JOBS) -timeout $(E2E_TIMEOUT) \
	  -out $(OUTPUT)/conformance -- $(filter-out --e2e-output=%,$(E2E_ARGS))

.PHONY: e2e-conformance-merge
e2e-conformance-merge: ## One grid of earlier e2e-conformance runs (PARTS: their _output/conformance directories), e.g. the nightly's per provider and version: _output/conformance-grid/report.md; exit 1 names every changed cell.
	@go run ./scenarios/tools/cmd/gauntlet-conformance -merge "$(PARTS)" -out $(OUTPUT)/conformance-grid

# The e2e matrix: every suite × provider × Kubernetes version, MATRIX_JOBS cells at once (default
# one after another), one grid.
VERSIONS    ?=
PROVIDERS   ?=
SUITES      ?=
MATRIX_JOBS ?= 1

.PHONY: e2e-matrix
e2e-matrix: ## Suites × providers × Kubernetes versions (VERSIONS, PROVIDERS, SUITES; default all; STRESS=N), MATRIX_JOBS cells at once (default 1): _output/matrix/report.md.
	@go run ./scenarios/tools/cmd/gauntlet-matrix -versions "$(VERSIONS)" -providers "$(PROVIDERS)" -suites "$(SUITES)" -stress "$(STRESS)" -jobs "$(MATRIX_JOBS)" -out $(OUTPUT)/matrix

.PHONY: e2e-matrix-merge
e2e-matrix-merge: ## One report of earlier matrix runs: PARTS (their output directories) → _output/matrix/report.md (the nightly workflow's last job).
	@go run ./scenarios/tools/cmd/gauntlet-matrix -merge "$(PARTS)" -out $(OUTPUT)/matrix

# Mutation testing through the suites (local provider): MUTANTS mutants that compile, picked
# by MUTATE_SEED, MUTATE_JOBS of them at once (or the mutants MUTANT_IDS names, comma-separated);
# per-suite coverage from a `make e2e COVER=1` of the same sources, if any.
MUTANTS     ?= 40
MUTATE_SEED ?= 1
MUTATE_JOBS ?= 2
MUTANT_IDS  ?=

.PHONY: mutate
mutate: control-plane ## Mutation testing of the operator and chart through the e2e suites: _output/mutate/report.md (MUTANTS, MUTATE_SEED, MUTATE_JOBS, MUTANT_IDS).
	@go run ./scenarios/tools/cmd/gauntlet-mutate -mutants $(MUTANTS) -seed $(MUTATE_SEED) -jobs $(MUTATE_JOBS) -only "$(MUTANT_IDS)" -out $(OUTPUT)/mutate -coverage $(COVER_OUTPUT)/e2e

.PHONY: coverage-report
coverage-report: ## Operator coverage: the counters of COVER=1 suites (_output/coverage/e2e) with the operator's unit and envtest tests, as _output/coverage/.
	@echo "• operator unit and envtest tests with coverage (-test.gocoverdir=$(COVER_OUTPUT)/unit)"
	@rm -rf $(COVER_OUTPUT)/unit && mkdir -p $(COVER_OUTPUT)/unit
	@go test -count=1 -cover -covermode=atomic -coverpkg=github.com/gauntlet-dev/gauntlet/operator/... ./operator/... \
	  -args -test.gocoverdir=$(CURDIR)/$(COVER_OUTPUT)/unit > $(COVER_OUTPUT)/unit-tests.log 2>&1 \
	  || { tail -30 $(COVER_OUTPUT)/unit-tests.log; echo "✗ operator tests failed; full log: $(COVER_OUTPUT)/unit-tests.log"; exit 1; }
	@go run ./scenarios/tools/cmd/e2e-coverage -e2e $(COVER_OUTPUT)/e2e -unit $(COVER_OUTPUT)/unit -out $(COVER_OUTPUT)

.PHONY: e2e-auto-certs
e2e-auto-certs: control-plane ## Suite e2e/autocert: automatic certificate mode and admission scenarios.
	$(E2E_TEST) ./e2e/autocert -args $(E2E_ARGS)

.PHONY: e2e-cert-manager
e2e-cert-manager: control-plane ## Suite e2e/certmanager: cert-manager mode (chart CA chain, Issuer/ClusterIssuer issuerRef, renewal under load), admission and conversion scenarios.
	$(E2E_TEST) ./e2e/certmanager -args $(E2E_ARGS)

.PHONY: e2e-external-certs
e2e-external-certs: control-plane ## Suite e2e/externalcert: external mode (user Secret + caBundle, OLM-style mount), admission and conversion scenarios.
	$(E2E_TEST) ./e2e/externalcert -args $(E2E_ARGS)

.PHONY: e2e-multi-operator
e2e-multi-operator: control-plane ## Suite e2e/multioperator: multi-operator lease topology (M1–M12) with the full failover and hand-over measurement (FAILOVER_PLAN=compare: P5 at once and one after another, compared).
	$(E2E_TEST) ./e2e/multioperator -args $(E2E_ARGS) --failover-plan=$(FAILOVER_PLAN)

.PHONY: e2e-troubleshooting
e2e-troubleshooting: control-plane ## Suite e2e/troubleshooting: T1–T13 — fault, symptom, doctor diagnosis, documented fix.
	$(E2E_TEST) ./e2e/troubleshooting -args $(E2E_ARGS)

.PHONY: e2e-hostile
e2e-hostile: control-plane ## Suite e2e/hostile: H1–H8 — hostile input to every path the operator serves, directly and through the Service; bounded answers, bounded memory, no restart.
	$(E2E_TEST) ./e2e/hostile -args $(E2E_ARGS)

BENCH_FLAGS         ?=
BENCH_COMPARE_FLAGS ?=
# Side A of `make bench-compare TARGET=<name>`: a version of the target's module the Go module proxy serves.
BASE_VERSION        ?=
# Side A of `make bench-compare`: where the working tree branched off main (main itself: HEAD).
BASE_REF            ?= $(shell git merge-base main HEAD 2>/dev/null || echo HEAD)

.PHONY: bench
bench: control-plane ## Webhook latency benchmark on the local provider (≈ 9 min): _output/bench/<run>/{result.json,report.md,*.svg}.
	@go run ./bench/cmd/gauntlet-bench run $(BENCH_FLAGS)

RESULTS ?= $(OUTPUT)/bench

.PHONY: bench-trend
bench-trend: ## Latency over time: p50/p99 per step across the runs in RESULTS (default _output/bench) → RESULTS/trend.{md,svg}.
	@go run ./bench/cmd/gauntlet-bench trend $(RESULTS)

.PHONY: bench-compare
bench-compare: control-plane ## A/B: the operator and chart at BASE_REF (default: main's merge base) against the working tree, both in one cluster, interleaved with the control and the floors (≈ 14 min); with TARGET=<name> BASE_VERSION=<v> (e.g. TARGET=gatekeeper BASE_VERSION=v3.17.0): the target at BASE_VERSION against its description's version, a local cluster each, loaded in turns; exit 1 on regression.
	@go run ./bench/cmd/gauntlet-bench ab $(if $(or $(BASE_VERSION),$(filter-out gauntlet,$(TARGET))),--target "$(TARGET)" --base-version "$(BASE_VERSION)",--base-ref $(BASE_REF)) $(BENCH_FLAGS) $(BENCH_COMPARE_FLAGS)

RELEASE   ?= dynamo
NAMESPACE ?= dynamo-system

.PHONY: doctor
doctor: ## Run the webhook doctor against the current kubeconfig (RELEASE, NAMESPACE, TEST_NAMESPACE, DOCTOR_FLAGS).
	@go run ./operator/cmd/kubectl-dynamo doctor --release $(RELEASE) --namespace $(NAMESPACE) $(if $(TEST_NAMESPACE),--test-namespace $(TEST_NAMESPACE)) $(DOCTOR_FLAGS)

.PHONY: kubectl-dynamo
kubectl-dynamo: ## Build the kubectl plugin into _output/bin (put it on PATH, then `kubectl dynamo doctor`).
	go build -o $(OUTPUT)/bin/kubectl-dynamo ./operator/cmd/kubectl-dynamo

.PHONY: kubectl-webhook-doctor
kubectl-webhook-doctor: ## Build the doctor for any operator's webhooks into _output/bin (put it on PATH, then `kubectl webhook-doctor -n NS`).
	go build -o $(OUTPUT)/bin/kubectl-webhook-doctor ./operator/cmd/kubectl-webhook-doctor

.PHONY: clean
clean: ## Remove build and test output (not the control-plane cache).
	rm -rf $(OUTPUT)

IMAGE ?= dynamo-operator:$(VERSION)

.PHONY: image
image: ## Build the operator image (FROM scratch, static binary) as IMAGE (default dynamo-operator:<version>).
	@mkdir -p $(OUTPUT)/image
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/gauntlet-dev/gauntlet/operator/internal/version.Version=$(VERSION)" \
	  -o $(OUTPUT)/image/dynamo-operator ./operator/cmd/dynamo-operator
	docker build -q -f operator/Dockerfile -t $(IMAGE) $(OUTPUT)/image
	@echo "✓ image $(IMAGE)"
