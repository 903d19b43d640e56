# SPDX-License-Identifier: MIT
# tpuemu: `make run` boots the VM and prints the device's identity;
# `make check` runs the host tests and the in-VM selftests.
# Set-up (`make deps`) runs first for both; it is idempotent.

BUILD		?= build
# One spelling for every object, however BUILD comes in (scripts export it
# absolute): a .d naming /abs/build/x.o leaves build/x.o without its headers.
override BUILD	:= $(patsubst $(CURDIR)/%,%,$(BUILD))
TPUEMU_CACHE	?= /var/cache/tpuemu
export TPUEMU_CACHE BUILD

KABI		= $(shell cat $(TPUEMU_CACHE)/kernel-abi 2>/dev/null)
KDIR		?= /usr/src/linux-headers-$(KABI)
KSELFTEST	= $(TPUEMU_CACHE)/kselftest

CC		?= cc
CFLAGS		?= -O2 -g
# Public structs grow at their end (tpurt_block_spec's memory_space):
# positional initialisers that stop early stay valid C, zero-filled.
WARNINGS	= -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
		  -Wno-unused-parameter -Wno-missing-field-initializers -Werror
BASE_CFLAGS	= -std=c11 -D_GNU_SOURCE $(WARNINGS) $(CFLAGS) -Iuapi
DRM_CFLAGS	= $(shell pkg-config --cflags libdrm 2>/dev/null)
DRM_LIBS	= $(shell pkg-config --libs libdrm 2>/dev/null)

ifeq ($(V),1)
Q =
quiet = @true
else
Q = @
quiet = @printf '  %-7s %s\n'
endif

# --- the device's rules (rules/): job decode and checks, the scalar core,
# dtypes, device parameters, the timing model. Plain C11, position
# independent: the engine, libtpurt.so and the tools all link it. ---
RULES_SRCS	= $(wildcard rules/*.c)
RULES_OBJS	= $(RULES_SRCS:%.c=$(BUILD)/%.o)
RULES_LIB	= $(BUILD)/lib/libtpurules.a
RULES_CFLAGS	= $(BASE_CFLAGS) -fPIC -Irules

# --- engine (qemu-device/engine): host build for tests and benchmarks ---
ENGINE_SRCS	= $(wildcard qemu-device/engine/*.c)
ENGINE_OBJS	= $(ENGINE_SRCS:%.c=$(BUILD)/%.o)
ENGINE_LIB	= $(BUILD)/lib/libtpuengine.a
BLAS_CFLAGS	= $(shell pkg-config --cflags openblas)
BLAS_LIBS	= $(shell pkg-config --libs openblas)
# Position independent too: libtpurt-sim.so.0 links it.
ENGINE_CFLAGS	= $(BASE_CFLAGS) -fPIC -fno-semantic-interposition -Iqemu-device/engine \
		  -Irules $(BLAS_CFLAGS)
ENGINE_LINK	= $(ENGINE_LIB) $(RULES_LIB) $(BLAS_LIBS) $(shell pkg-config --libs sleef) \
		  -lpthread -lm

# --- libtpurt ---
# The shared library (what the guest loads) links no engine or OpenBLAS:
# it loads the in-process device, libtpurt-sim.so.0 (sim.c, the engine,
# OpenBLAS), from beside itself when a program asks for it (simload.c,
# TPURT_DEVICE=sim). libtpurt-sim.a is all of libtpurt with sim.c linked
# in, for host tests and benchmarks that link the engine anyway.
TPURT_SIM_SRCS	= libtpurt/sim.c libtpurt/simload.c libtpurt/sim_entry.c
TPURT_SRCS	= $(filter-out $(TPURT_SIM_SRCS),$(wildcard libtpurt/*.c))
TPURT_OBJS	= $(TPURT_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/libtpurt/simload.o
TPURT_SIM_OBJS	= $(TPURT_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/libtpurt/sim.o
TPURT_SO	= $(BUILD)/lib/libtpurt.so.0
TPURT_SIM_LIB	= $(BUILD)/lib/libtpurt-sim.a
TPURT_SIM_SO	= $(BUILD)/lib/libtpurt-sim.so.0
TPURT_SIM_SO_OBJS = $(BUILD)/libtpurt/sim.o $(BUILD)/libtpurt/sim_entry.o
TPURT_CFLAGS	= $(BASE_CFLAGS) -fPIC -Ilibtpurt/include -Irules $(DRM_CFLAGS)
TPURT_LINK	= -L$(BUILD)/lib -l:libtpurt.so.0 -Wl,-rpath,'$$ORIGIN/../lib' $(DRM_LIBS)
PROG_CFLAGS	= $(BASE_CFLAGS) -Ilibtpurt/include $(DRM_CFLAGS)
# Tests build as the kernel's selftests do: the harness is clean at -Wall.
TEST_CFLAGS	= -std=gnu11 -D_GNU_SOURCE -Wall -Werror $(CFLAGS) -Iuapi \
		  -Ilibtpurt/include $(DRM_CFLAGS) -I$(KSELFTEST)

# --- programs that run in the guest ---
SAMPLES		= tpu-info block_matmul_host matmul_first matmul_bf16 block_sparse \
		  analyze_matmul matmul_transpose_rhs matmul_activation \
		  matmul_input_fusion matmul_int8 matmul_vjp softmax layer_norm \
		  flash_attention manual_pipeline sparse_dsd paged_attention
# Samples that also build for the host, on the in-process device
# (sample_open() with TPUEMU_SAMPLE_SIM=1): `make host-samples`.
HOST_SAMPLES	= softmax layer_norm flash_attention manual_pipeline sparse_dsd \
		  paged_attention
# Selftests that run the samples' kernels (samples/*kernels.c); they also
# build for the host, and take TPUEMU_SAMPLE_SIM=1 there.
SAMPLE_SELFTESTS = tpu_attention_test tpu_memory_test
HOST_SAMPLE_BIN	= $(BUILD)/host/bin
GUEST_BENCH	= bench_dma bench_matmul bench_submit
GUEST_BIN	= $(BUILD)/guest/bin
GUEST_PROGS	= $(SAMPLES:%=$(GUEST_BIN)/%) $(GUEST_BENCH:%=$(GUEST_BIN)/%)
# The selftests (selftests/Makefile lists them) build into $(GUEST_BIN) too,
# and install as the kernel's kselftest install lays them out, with its
# run_kselftest.sh: the guest's /kselftest (scripts/vm-run.sh).
GUEST_KSELFTEST	= $(BUILD)/guest/kselftest

# --- host tools (tools/): the timing model's CLI, the parameter table ---
TOOL_BIN	= $(BUILD)/bin
TOOLS		= $(TOOL_BIN)/tpurt-model $(TOOL_BIN)/tpurt-params $(TOOL_BIN)/tpuemu-blas-core
PUBLISHED_TSV	= tools/v5e-published.tsv

# --- host unit tests (tests/) ---
HOST_TESTS	= engine_vector_test engine_config_test engine_copy_test engine_gemm_test \
		  engine_model_test engine_matmul_test engine_pipeline_test \
		  engine_scalar_test engine_errors_test engine_ops_test \
		  engine_debug_test engine_cast_test engine_pool_test \
		  engine_model_match_test engine_abort_test engine_vec_test \
		  engine_trace_test engine_memory_test engine_move_test engine_element_test \
		  engine_gather_test engine_prng_test engine_loop_test engine_print_test \
		  engine_delay_test \
		  engine_revisit_test engine_panels_test \
		  tpurt_open_test params_table_test $(SIM_TESTS) tpurt_trace_test \
		  bench_json_test sample_check_test $(HOST_SCRIPT_TESTS)
# Script tests (tests/NAME.sh, generated into $(BUILD)/tests/NAME): make
# install with pkg-config out of tree; the reference's coverage of
# libtpurt.map; the Python front end's pytest run.
HOST_SCRIPT_TESTS = install_test doc_coverage_test python_test
# Runtime tests on the in-process device (libtpurt-sim.a).
SIM_TESTS	= tpurt_indexmap_test tpurt_sim_test tpurt_pallas_test \
		  tpurt_matmul_test tpurt_analysis_test tpurt_template_test \
		  tpurt_scalar_core_test tpurt_stmt_test tpurt_stmt_sim_test \
		  tpurt_utilization_test tpurt_memory_test tpurt_loop_test \
		  tpurt_print_test
HOST_TEST_BINS	= $(HOST_TESTS:%=$(BUILD)/tests/%)

.PHONY: sparse all deps userspace module qemu run shell check host-check vm-check clean \
	list-host-tests list-samples guest-selftests model-table bench bench-gemm bench-engine \
	bench-dma bench-submit host-samples bench-attention roofline trace-example

all: userspace module qemu

deps:
	$(Q)scripts/deps.sh

userspace: $(TPURT_SO) $(TPURT_SIM_LIB) $(RULES_LIB) $(ENGINE_LIB) $(GUEST_PROGS) guest-selftests \
	$(HOST_TEST_BINS) $(TOOLS) \
	$(HOST_SAMPLES:%=$(HOST_SAMPLE_BIN)/%) $(SAMPLE_SELFTESTS:%=$(HOST_SAMPLE_BIN)/%)

$(BUILD)/rules/%.o: rules/%.c
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(RULES_CFLAGS) -MMD -MP -c -o $@ $<

$(RULES_LIB): $(RULES_OBJS)
	$(quiet) AR $@
	$(Q)mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/qemu-device/engine/%.o: qemu-device/engine/%.c
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(ENGINE_CFLAGS) -MMD -MP -c -o $@ $<

$(ENGINE_LIB): $(ENGINE_OBJS)
	$(quiet) AR $@
	$(Q)mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/libtpurt/%.o: libtpurt/%.c
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(TPURT_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/libtpurt/sim.o: TPURT_CFLAGS += -Iqemu-device/engine

$(TPURT_SIM_LIB): $(TPURT_SIM_OBJS)
	$(quiet) AR $@
	$(Q)mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

# sim.c and what it uses of libtpurt (from the archive: a private copy),
# the engine, the rules. Only sim_entry's tpurt_sim_entry is exported; -z
# defs: nothing is left for the loading libtpurt to provide by accident.
$(TPURT_SIM_SO): $(TPURT_SIM_SO_OBJS) $(TPURT_SIM_LIB) $(ENGINE_LIB) $(RULES_LIB) \
		libtpurt/libtpurt-sim.map
	$(quiet) LD $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -shared -Wl,-soname,libtpurt-sim.so.0 -Wl,-z,defs \
		-Wl,--version-script,libtpurt/libtpurt-sim.map -o $@ $(TPURT_SIM_SO_OBJS) \
		$(TPURT_SIM_LIB) $(ENGINE_LINK) $(DRM_LIBS) -luring
	$(Q)ln -sf libtpurt-sim.so.0 $(BUILD)/lib/libtpurt-sim.so

userspace: $(TPURT_SIM_SO)

$(TPURT_SO): $(TPURT_OBJS) $(RULES_LIB) libtpurt/libtpurt.map
	$(quiet) LD $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -shared -Wl,-soname,libtpurt.so.0 \
		-Wl,--version-script,libtpurt/libtpurt.map -o $@ $(TPURT_OBJS) $(RULES_LIB) \
		$(DRM_LIBS) -luring -lm -ldl
	$(Q)ln -sf libtpurt.so.0 $(BUILD)/lib/libtpurt.so

# Every sample may use sample_util and the shared kernels (samples/kernels.[ch],
# samples/memory_kernels.[ch]).
SAMPLE_HELPERS	= samples/sample_util.c samples/kernels.c samples/memory_kernels.c
SAMPLE_DEPS	= $(SAMPLE_HELPERS) samples/sample_util.h samples/kernels.h \
		  samples/memory_kernels.h

$(GUEST_BIN)/%: samples/%.c $(SAMPLE_DEPS) $(TPURT_SO)
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(PROG_CFLAGS) -o $@ $< $(SAMPLE_HELPERS) $(TPURT_LINK) -lm

# The same source linked with libtpurt-sim.a, the engine and OpenBLAS.
$(HOST_SAMPLE_BIN)/%: samples/%.c $(SAMPLE_DEPS) $(TPURT_SIM_LIB) $(ENGINE_LIB) $(RULES_LIB)
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(PROG_CFLAGS) -o $@ $< $(SAMPLE_HELPERS) $(TPURT_SIM_LIB) \
		$(ENGINE_LINK) $(DRM_LIBS) -luring -lm

# tpu_attention_test and tpu_memory_test run the samples' kernels; their
# host builds, like the samples', take TPUEMU_SAMPLE_SIM=1 (the guest's are
# selftests/Makefile's).
$(SAMPLE_SELFTESTS:%=$(HOST_SAMPLE_BIN)/%): $(HOST_SAMPLE_BIN)/%: selftests/%.c \
		$(SAMPLE_DEPS) selftests/tpu_require_device.h $(TPURT_SIM_LIB) $(ENGINE_LIB) \
		$(RULES_LIB) $(KSELFTEST)/kselftest_harness.h
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(TEST_CFLAGS) -Isamples -o $@ $< $(SAMPLE_HELPERS) $(TPURT_SIM_LIB) \
		$(ENGINE_LINK) $(DRM_LIBS) -luring -lm

# The host-built samples and selftests on the in-process device.
host-samples: $(HOST_SAMPLES:%=$(HOST_SAMPLE_BIN)/%) $(SAMPLE_SELFTESTS:%=$(HOST_SAMPLE_BIN)/%)
	$(Q)rc=0; for s in $(HOST_SAMPLES) $(SAMPLE_SELFTESTS); do \
		TPUEMU_SAMPLE_SIM=1 $(HOST_SAMPLE_BIN)/$$s || rc=1; done; exit $$rc

# The selftests, by selftests/Makefile with the kernel's lib.mk and harness
# (from Debian's linux-source, make deps); lib.mk rebuilds what changed.
guest-selftests: $(TPURT_SO)
	$(quiet) KSFT $(GUEST_KSELFTEST)
	$(Q)mkdir -p $(GUEST_BIN)
	$(Q)$(MAKE) --no-print-directory $(if $(filter 1,$(V)),,-s) -C selftests \
		OUTPUT=$(abspath $(GUEST_BIN)) TPURT_LIBDIR=$(abspath $(BUILD)/lib) \
		KSFT_INSTALL_PATH=$(abspath $(GUEST_KSELFTEST)) kselftest_install

# Every host test may use the job builder (tests/job_builder.[ch]).
TEST_HELPERS	= tests/job_builder.c

$(BUILD)/tests/%: tests/%.c $(TEST_HELPERS) tests/job_builder.h $(TPURT_SO) \
		$(ENGINE_LIB) $(RULES_LIB) $(KSELFTEST)/kselftest_harness.h
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(TEST_CFLAGS) -Iqemu-device/engine -Irules -o $@ $< $(TEST_HELPERS) \
		$(TEST_EXTRA) $(ENGINE_LINK) $(TPURT_LINK) -lm

# The statement tests share the lowering helpers (tests/kernel_lowering.h).
$(BUILD)/tests/tpurt_stmt_test $(BUILD)/tests/tpurt_memory_test: tests/kernel_lowering.h

# A script test runs from $(BUILD)/tests with the tree's paths filled in.
$(BUILD)/tests/%: tests/%.sh
	$(quiet) GEN $@
	$(Q)mkdir -p $(dir $@)
	$(Q)sed -e "s|@TOP@|$(CURDIR)|" -e "s|@BUILD@|$(abspath $(BUILD))|" $< > $@
	$(Q)chmod +x $@

# --- host benchmarks (bench/): figures beside their anchors, never timed tests ---
# Each bench target's "bench:" lines also land in one JSON file per run,
# $(BUILD)/bench/results-<date>-<target>.json (scripts/bench-json.sh).
BENCH_CFLAGS	= $(BASE_CFLAGS) -Iqemu-device/engine -Irules $(BLAS_CFLAGS)

$(BUILD)/bench/%: bench/%.c $(ENGINE_LIB) $(RULES_LIB)
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(BENCH_CFLAGS) -o $@ $< $(BENCH_EXTRA) $(ENGINE_LINK) -lm

# OpenBLAS's real kernels for the anchor on a CPU it does not know.
bench-gemm: $(BUILD)/bench/bench_gemm $(BUILD)/bin/tpuemu-blas-core
	$(Q)BUILD=$(BUILD); . scripts/blas-env.sh; scripts/bench-json.sh bench-gemm -- $<

# In the VM; host OpenBLAS runs before and after it as the anchor.
bench: deps
	$(Q)$(MAKE) --no-print-directory all $(BUILD)/bench/bench_openblas
	$(Q)scripts/bench-json.sh bench -- scripts/bench-matmul.sh

$(BUILD)/bench/bench_openblas: bench/bench_openblas.c
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(BASE_CFLAGS) $(BLAS_CFLAGS) -o $@ $< $(BLAS_LIBS)

# In the VM; the host's memcpy anchor runs before and after it.
bench-dma: deps
	$(Q)$(MAKE) --no-print-directory all $(BUILD)/bench/bench_memcpy
	$(Q)scripts/bench-json.sh bench-dma -- scripts/bench-dma.sh

$(GUEST_BIN)/%: bench/%.c $(TPURT_SO)
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(PROG_CFLAGS) -o $@ $< $(TPURT_LINK)

$(SIM_TESTS:%=$(BUILD)/tests/%): $(TPURT_SIM_LIB)
$(SIM_TESTS:%=$(BUILD)/tests/%): TEST_EXTRA = $(TPURT_SIM_LIB) -luring

$(GUEST_BIN)/bench_submit: selftests/tpu_job_blob.h selftests/tpu_wait_spin.h

# Job submission paths in the VM: ioctl (the anchor) and io_uring batches.
bench-submit: module userspace
	$(Q)scripts/bench-json.sh bench-submit -- scripts/vm-run.sh --timeout 300 -- bench_submit

# Engine jobs are the tests' matmul kernels, from the job builder.
$(BUILD)/bench/bench_engine: $(TEST_HELPERS) tests/job_builder.h
$(BUILD)/bench/bench_gemm: bench/isa_peak.c bench/isa_peak.h
$(BUILD)/bench/bench_gemm: BENCH_EXTRA = bench/isa_peak.c
$(BUILD)/bench/bench_engine: BENCH_EXTRA = -Itests $(TEST_HELPERS)

bench-engine: $(BUILD)/bench/bench_engine
	$(Q)scripts/bench-json.sh bench-engine -- $<

# The vector unit's row kernels beside the host's memcpy of the same bytes.
.PHONY: bench-vec
bench-vec: $(BUILD)/bench/bench_vec
	$(Q)scripts/bench-json.sh bench-vec -- $<

# The benches on the in-process device share bench/bench_util.[ch].
BENCH_SIM_HELPERS = bench/bench_util.c

# Flash attention and softmax (the samples' kernels) on the in-process
# device, beside host OpenBLAS and memcpy in the same run.
$(BUILD)/bench/bench_attention: $(SAMPLE_DEPS) $(BENCH_SIM_HELPERS) bench/bench_util.h $(TPURT_SIM_LIB)
$(BUILD)/bench/bench_attention: BENCH_EXTRA = -Ilibtpurt/include -Isamples \
	$(SAMPLE_HELPERS) $(BENCH_SIM_HELPERS) $(TPURT_SIM_LIB) $(DRM_LIBS) -luring

bench-attention: $(BUILD)/bench/bench_attention
	$(Q)scripts/bench-json.sh bench-attention -- $<

# Paged attention (the sample's kernel) on the in-process device, beside a
# host reference that gathers the pages and calls OpenBLAS, in the same run.
$(BUILD)/bench/bench_paged: $(SAMPLE_DEPS) $(BENCH_SIM_HELPERS) bench/bench_util.h $(TPURT_SIM_LIB)
$(BUILD)/bench/bench_paged: BENCH_EXTRA = -Ilibtpurt/include -Isamples \
	$(SAMPLE_HELPERS) $(BENCH_SIM_HELPERS) $(TPURT_SIM_LIB) $(DRM_LIBS) -luring

.PHONY: bench-paged
bench-paged: $(BUILD)/bench/bench_paged
	$(Q)scripts/bench-json.sh bench-paged -- $<

# The model reads the published table next to the tests; the path is fixed
# at build time so the test runs from any directory.
$(BUILD)/tests/engine_model_test: tools/published.c tools/published.h $(PUBLISHED_TSV)
$(BUILD)/tests/engine_model_test: TEST_EXTRA = -Itools tools/published.c \
	-DPUBLISHED_TSV='"$(CURDIR)/$(PUBLISHED_TSV)"' -lm

$(TOOL_BIN)/%: tools/%.c tools/published.c tools/published.h $(ENGINE_LIB) $(RULES_LIB)
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(ENGINE_CFLAGS) -Itools -o $@ $< tools/published.c $(TOOL_EXTRA) \
		$(ENGINE_LINK) -lm

$(TOOL_BIN)/tpurt-model: tools/roofline.c tools/roofline.h
$(TOOL_BIN)/tpurt-model: TOOL_EXTRA = tools/roofline.c

# The device parameters' table (uapi/tpu_params.h) as README and check.sh use it.
$(TOOL_BIN)/tpurt-params: tools/tpurt-params.c uapi/tpu_params.h uapi/tpu_drm.h
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(BASE_CFLAGS) $(DRM_CFLAGS) -o $@ $<

# README's table of parameters is what tpurt-params prints.
# The samples' own checks, as the samples link them.
$(BUILD)/tests/sample_check_test: $(SAMPLE_DEPS)
$(BUILD)/tests/sample_check_test: TEST_EXTRA = samples/sample_util.c

$(BUILD)/tests/params_table_test: $(TOOL_BIN)/tpurt-params README.md
$(BUILD)/tests/params_table_test: TEST_EXTRA = \
	-DPARAMS_TOOL='"$(CURDIR)/$(TOOL_BIN)/tpurt-params"' -DREADME='"$(CURDIR)/README.md"'

# Traces on the in-process device and from tpurt-model, loaded by python.
$(BUILD)/tests/tpurt_trace_test: $(TPURT_SIM_LIB) tests/trace_check.py $(TOOL_BIN)/tpurt-model
$(BUILD)/tests/tpurt_trace_test: TEST_EXTRA = $(TPURT_SIM_LIB) -luring \
	-DTRACE_CHECK='"$(CURDIR)/tests/trace_check.py"' \
	-DTPURT_MODEL='"$(CURDIR)/$(TOOL_BIN)/tpurt-model"'

$(BUILD)/tests/bench_json_test: scripts/bench-json.sh
$(BUILD)/tests/bench_json_test: TEST_EXTRA = \
	-DBENCH_JSON='"$(CURDIR)/scripts/bench-json.sh"'

# The published v5e table beside the model's figures (no VM, instant).
model-table: $(TOOL_BIN)/tpurt-model
	$(Q)$(TOOL_BIN)/tpurt-model --table $(PUBLISHED_TSV)

# The device's roofline with the guide's block sweeps: build/roofline/
# roofline.svg and .png, through gnuplot (gnuplot-nox, make deps).
roofline: $(TOOL_BIN)/tpurt-model
	$(Q)scripts/roofline.sh $(TOOL_BIN)/tpurt-model $(PUBLISHED_TSV) $(BUILD)/roofline

# A what-if's trace (build/trace/example.json, for ui.perfetto.dev) and its
# first steps drawn by gnuplot (example.svg, example.png).
TRACE_EXAMPLE	= --m 1024 --k 1024 --n 1024 --bm 256 --bk 256 --bn 512 --cores 2
trace-example: $(TOOL_BIN)/tpurt-model
	$(Q)mkdir -p $(BUILD)/trace
	$(Q)$(TOOL_BIN)/tpurt-model $(TRACE_EXAMPLE) --trace $(BUILD)/trace/example.json
	$(Q)for f in svg png; do \
		scripts/trace-plot.py $(BUILD)/trace/example.json \
			$(BUILD)/trace/example.$$f --steps 12 || exit 1; done

module:
	$(Q)$(MAKE) -C $(KDIR) M=$(CURDIR) modules $(if $(filter 1,$(V)),,-s)

# The driver through sparse (C=2: every file, built or not); a warning fails.
# Sparse builds a copy of the module's sources in $(SPARSE_MODULE), so
# ./tpu.ko is never rewritten while a VM pass of make check reads it.
SPARSE_MODULE	= $(BUILD)/sparse/module
sparse:
	$(Q)mkdir -p $(SPARSE_MODULE)
	$(Q)rsync -a Kbuild driver uapi $(SPARSE_MODULE)/
	$(Q)out=$$($(MAKE) -C $(KDIR) M=$(abspath $(SPARSE_MODULE)) C=2 modules 2>&1 >/dev/null) || \
		{ echo "$$out"; exit 1; }; \
	warn=$$(echo "$$out" | grep -E '(warning|error):'); \
	[ -z "$$warn" ] || { echo "$$warn"; exit 1; }

qemu:
	$(Q)scripts/build-qemu.sh

# QEMU_DEVICE_OPTS=hbm-size=2G,cores=2 passes tpu-mxu properties; ACCEL=kvm.
# The samples print PASS or FAIL; the run fails if any fails. They run at
# sizes that take seconds under TCG; FULL=1 runs the guide's sizes
# (TPUEMU_SAMPLE_FULL=1: 4096^3 in analyze_matmul, 2048^3 elsewhere). The
# Python samples (samples/py) run in one python3: vm-run.sh adds Python to
# the image. All of them in two lanes on the guest's two CPUs (run-lanes:
# each one's output whole, in this order), the Python samples first: the
# longest, so the lanes even out.
RUN_SAMPLES	= run-lanes 2 "python3 samples/py/run_all.py" $(SAMPLES)
RUN_ENV		= $(if $(filter 1,$(FULL)),TPUEMU_SAMPLE_FULL=1)
run: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)VM_ENV="$(RUN_ENV) $$VM_ENV" scripts/vm-run.sh --timeout 600 -- '$(RUN_SAMPLES)'

# After editing the driver or a selftest: rebuild tpu.ko and the selftests,
# boot, and run only the selftests T (one or more names) under the kernel's
# runner, judged as make check judges them. No make deps, no QEMU build:
#   make selftest T=tpu_job_test
#   make selftest T=tpu_storm_test VM_ENV=TPU_STORM_SECONDS=60
.PHONY: selftest
ifneq ($(filter selftest,$(MAKECMDGOALS)),)
ifeq ($(T),)
$(error name the selftests: make selftest T=tpu_job_test)
endif
endif
selftest: module guest-selftests
	$(Q){ VM_ENV="TPU_SELFTEST_REQUIRE_DEVICE=1 $$VM_ENV" scripts/vm-run.sh --timeout 600 -- \
		/kselftest/run_kselftest.sh $(foreach t,$(T),-t tpu:$(t)) 2>&1 || \
		echo "not ok - vm-run: exit $$?"; } | scripts/tap-run.sh --kselftest

# Every sample on the host's in-process device (TPURT_DEVICE=sim): the
# guest's own binaries, whose libtpurt.so.0 loads libtpurt-sim.so.0 from
# build/lib. QEMU_DEVICE_OPTS=cores=2,hbm-size=2G sets its parameters as it
# sets the VM's device. No VM: a minute or two.
HOST_DEVICE	= sim$(if $(QEMU_DEVICE_OPTS),:$(QEMU_DEVICE_OPTS))
.PHONY: run-host
run-host: $(TPURT_SO) $(TPURT_SIM_SO) $(SAMPLES:%=$(GUEST_BIN)/%)
	$(Q)failed=; for s in $(SAMPLES); do \
		LD_LIBRARY_PATH=$(BUILD)/lib$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH} \
		TPURT_DEVICE=$(HOST_DEVICE) $(GUEST_BIN)/$$s || failed="$$failed $$s"; \
	done; \
	if [ -n "$$failed" ]; then echo "run-host: FAILED:$$failed"; exit 1; fi; \
	echo "run-host: all $(words $(SAMPLES)) samples passed on TPURT_DEVICE=$(HOST_DEVICE)"

shell: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/vm-run.sh --shell

check: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/check.sh

# make check-debug: the VM passes on a debug kernel (KASAN, lockdep,
# kmemleak, DMA-API debugging; scripts/build-debug-kernel.sh), its own
# tpu.ko and QEMU under ASan and UBSan (README, "Debug kernel and
# sanitizers"). Not part of make check. The module builds out of tree in
# $(DEBUG_MODULE), from copies of Kbuild, driver/ and uapi/ (Linux 6.1 has
# no separate output folder for M=), so ./tpu.ko stays the normal one.
DEBUG_MODULE	= $(BUILD)/debug/module
.PHONY: check-debug debug-module
check-debug: deps
	$(Q)$(MAKE) --no-print-directory userspace
	$(Q)scripts/build-debug-kernel.sh
	$(Q)QEMU_VARIANT=asan nice -n 10 scripts/build-qemu.sh
	$(Q)$(MAKE) --no-print-directory debug-module
	$(Q)scripts/check.sh --debug

debug-module:
	$(Q)mkdir -p $(DEBUG_MODULE)
	$(Q)rsync -a Kbuild driver uapi $(DEBUG_MODULE)/
	$(Q)$(MAKE) -C $$(scripts/build-debug-kernel.sh --print-dir)/build \
		M=$(abspath $(DEBUG_MODULE)) modules $(if $(filter 1,$(V)),,-s)

# --- make install: PREFIX (default /usr/local), DESTDIR for staging ---
# libtpurt.so.0 and libtpurt-sim.so.0 (each with its .so symlink and .pc),
# tpurt.h, the uAPI headers in include/tpuemu/ (the .pc's cflags name both
# folders), the tools; ldconfig when installing for real (no DESTDIR).
PREFIX		?= /usr/local
BINDIR		?= $(PREFIX)/bin
LIBDIR		?= $(PREFIX)/lib
INCLUDEDIR	?= $(PREFIX)/include
DATADIR		?= $(PREFIX)/share
PKGCONFIGDIR	?= $(LIBDIR)/pkgconfig
TPURT_VERSION	= 0.1.0
UAPI_HEADERS	= uapi/tpu_params.h uapi/tpu_job.h uapi/tpu_drm.h uapi/tpu_hw.h \
		  uapi/tpu_trace.h uapi/tpu_print.h
INSTALL_LIBS	= libtpurt libtpurt-sim
INSTALL_TOOLS	= $(TOOL_BIN)/tpurt-model $(TOOL_BIN)/tpurt-params $(GUEST_BIN)/tpu-info
# A directory in the .pc files: ${prefix}/... when under PREFIX.
pc_dir		= $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))

.PHONY: install uninstall
install: $(TPURT_SO) $(TPURT_SIM_SO) $(INSTALL_TOOLS)
	$(quiet) INSTALL $(DESTDIR)$(PREFIX)
	$(Q)install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(BINDIR) \
		$(DESTDIR)$(INCLUDEDIR)/tpuemu $(DESTDIR)$(DATADIR)/tpuemu
	$(Q)for l in $(INSTALL_LIBS); do \
		install -m 0755 $(BUILD)/lib/$$l.so.0 $(DESTDIR)$(LIBDIR)/$$l.so.$(TPURT_VERSION) && \
		ln -sf $$l.so.$(TPURT_VERSION) $(DESTDIR)$(LIBDIR)/$$l.so.0 && \
		ln -sf $$l.so.0 $(DESTDIR)$(LIBDIR)/$$l.so && \
		sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(call pc_dir,$(LIBDIR))|' \
		    -e 's|@INCLUDEDIR@|$(call pc_dir,$(INCLUDEDIR))|' \
		    -e 's|@VERSION@|$(TPURT_VERSION)|' libtpurt/$$l.pc.in \
		    > $(DESTDIR)$(PKGCONFIGDIR)/$$l.pc || exit 1; \
	done
	$(Q)install -m 0644 libtpurt/include/tpurt.h $(DESTDIR)$(INCLUDEDIR)/
	$(Q)install -m 0644 $(UAPI_HEADERS) $(DESTDIR)$(INCLUDEDIR)/tpuemu/
	$(Q)install -m 0755 $(INSTALL_TOOLS) $(DESTDIR)$(BINDIR)/
	$(Q)install -m 0644 $(PUBLISHED_TSV) $(DESTDIR)$(DATADIR)/tpuemu/
	$(Q)[ -n "$(DESTDIR)" ] || ldconfig 2>/dev/null || true

uninstall:
	$(Q)for l in $(INSTALL_LIBS); do \
		rm -f $(DESTDIR)$(LIBDIR)/$$l.so.$(TPURT_VERSION) $(DESTDIR)$(LIBDIR)/$$l.so.0 \
		      $(DESTDIR)$(LIBDIR)/$$l.so $(DESTDIR)$(PKGCONFIGDIR)/$$l.pc; \
	done
	$(Q)rm -f $(DESTDIR)$(INCLUDEDIR)/tpurt.h $(addprefix $(DESTDIR)$(INCLUDEDIR)/tpuemu/,$(notdir $(UAPI_HEADERS))) \
		$(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(INSTALL_TOOLS))) \
		$(DESTDIR)$(DATADIR)/tpuemu/$(notdir $(PUBLISHED_TSV))
	$(Q)rmdir $(DESTDIR)$(INCLUDEDIR)/tpuemu $(DESTDIR)$(DATADIR)/tpuemu 2>/dev/null || true

# The host tests scripts/check.sh runs (from $(BUILD)/tests).
list-host-tests:
	@echo $(HOST_TESTS)

# The samples scripts/check.sh runs in the guest.
list-samples:
	@echo $(SAMPLES)

# Fuzzing with libFuzzer under ASan and UBSan: fuzz, fuzz-check, fuzz-seeds.
include fuzz/fuzz.mk

clean:
	$(Q)rm -rf $(BUILD)
	$(Q)$(MAKE) -C $(KDIR) M=$(CURDIR) clean -s 2>/dev/null || true

-include $(RULES_OBJS:.o=.d) $(ENGINE_OBJS:.o=.d) $(TPURT_SIM_OBJS:.o=.d) \
	$(TPURT_SIM_SRCS:%.c=$(BUILD)/%.d)
