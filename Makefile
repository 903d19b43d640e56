# SPDX-License-Identifier: MIT
# tpuemu: `make run` boots the VM and prints the device's identity;
# `make check` runs the host tests and the in-VM selftests.
# Set-up (`make deps`) runs first for both; it is idempotent.

BUILD		?= build
TPUEMU_CACHE	?= /var/cache/tpuemu
export TPUEMU_CACHE BUILD

KABI		= $(shell cat $(TPUEMU_CACHE)/kernel-abi 2>/dev/null)
KDIR		?= /usr/src/linux-headers-$(KABI)
KSELFTEST	= $(TPUEMU_CACHE)/kselftest

CC		?= cc
CFLAGS		?= -O2 -g
WARNINGS	= -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
		  -Wno-unused-parameter -Werror
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
ENGINE_CFLAGS	= $(BASE_CFLAGS) -Iqemu-device/engine -Irules $(BLAS_CFLAGS)
ENGINE_LINK	= $(ENGINE_LIB) $(RULES_LIB) $(BLAS_LIBS) $(shell pkg-config --libs sleef) \
		  -lpthread -lm

# --- libtpurt ---
# The shared library (what the guest loads) talks to the render node only;
# libtpurt-sim.a adds the in-process device (sim.c), which links the engine
# and OpenBLAS, for host tests and host tools.
TPURT_SRCS	= $(filter-out libtpurt/sim.c libtpurt/nosim.c,$(wildcard libtpurt/*.c))
TPURT_OBJS	= $(TPURT_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/libtpurt/nosim.o
TPURT_SIM_OBJS	= $(TPURT_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/libtpurt/sim.o
TPURT_SO	= $(BUILD)/lib/libtpurt.so.0
TPURT_SIM_LIB	= $(BUILD)/lib/libtpurt-sim.a
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
		  flash_attention
# Samples that also build for the host, on the in-process device
# (sample_open() with TPUEMU_SAMPLE_SIM=1): `make host-samples`.
HOST_SAMPLES	= softmax layer_norm flash_attention
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
TOOLS		= $(TOOL_BIN)/tpurt-model $(TOOL_BIN)/tpurt-params
PUBLISHED_TSV	= tools/v5e-published.tsv

# --- host unit tests (tests/) ---
HOST_TESTS	= engine_vector_test engine_config_test engine_copy_test engine_gemm_test \
		  engine_model_test engine_matmul_test engine_pipeline_test \
		  engine_scalar_test engine_errors_test engine_ops_test \
		  engine_debug_test engine_cast_test engine_pool_test \
		  engine_model_match_test engine_abort_test engine_vec_test \
		  tpurt_open_test params_table_test $(SIM_TESTS)
# Runtime tests on the in-process device (libtpurt-sim.a).
SIM_TESTS	= tpurt_indexmap_test tpurt_sim_test tpurt_pallas_test \
		  tpurt_matmul_test tpurt_analysis_test tpurt_template_test \
		  tpurt_scalar_core_test tpurt_stmt_test tpurt_stmt_sim_test
HOST_TEST_BINS	= $(HOST_TESTS:%=$(BUILD)/tests/%)

.PHONY: all deps userspace module qemu run shell check host-check vm-check clean \
	list-host-tests list-samples guest-selftests model-table bench bench-gemm bench-engine bench-dma bench-submit \
	host-samples bench-attention

all: userspace module qemu

deps:
	$(Q)scripts/deps.sh

userspace: $(TPURT_SO) $(TPURT_SIM_LIB) $(RULES_LIB) $(ENGINE_LIB) $(GUEST_PROGS) guest-selftests \
	$(HOST_TEST_BINS) $(TOOLS) \
	$(HOST_SAMPLES:%=$(HOST_SAMPLE_BIN)/%) $(HOST_SAMPLE_BIN)/tpu_attention_test

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

$(TPURT_SO): $(TPURT_OBJS) $(RULES_LIB) libtpurt/libtpurt.map
	$(quiet) LD $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -shared -Wl,-soname,libtpurt.so.0 \
		-Wl,--version-script,libtpurt/libtpurt.map -o $@ $(TPURT_OBJS) $(RULES_LIB) \
		$(DRM_LIBS) -luring -lm
	$(Q)ln -sf libtpurt.so.0 $(BUILD)/lib/libtpurt.so

# Every sample may use sample_util and the shared kernels (samples/kernels.[ch]).
SAMPLE_HELPERS	= samples/sample_util.c samples/kernels.c
SAMPLE_DEPS	= $(SAMPLE_HELPERS) samples/sample_util.h samples/kernels.h

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

# tpu_attention_test runs the samples' kernels (samples/kernels.c); its
# host build, like the samples', takes TPUEMU_SAMPLE_SIM=1.
ATTN_TEST_SRCS	= selftests/tpu_attention_test.c $(SAMPLE_HELPERS)

$(HOST_SAMPLE_BIN)/tpu_attention_test: $(ATTN_TEST_SRCS) $(SAMPLE_DEPS) \
		selftests/tpu_require_device.h $(TPURT_SIM_LIB) $(ENGINE_LIB) $(RULES_LIB) \
		$(KSELFTEST)/kselftest_harness.h
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(TEST_CFLAGS) -Isamples -o $@ $(ATTN_TEST_SRCS) $(TPURT_SIM_LIB) \
		$(ENGINE_LINK) $(DRM_LIBS) -luring -lm

# The new samples and tpu_attention_test on the in-process device.
host-samples: $(HOST_SAMPLES:%=$(HOST_SAMPLE_BIN)/%) $(HOST_SAMPLE_BIN)/tpu_attention_test
	$(Q)rc=0; for s in $(HOST_SAMPLES) tpu_attention_test; do \
		TPUEMU_SAMPLE_SIM=1 $(HOST_SAMPLE_BIN)/$$s || rc=1; done; exit $$rc

# The selftests, by selftests/Makefile with the kernel's lib.mk and harness
# (from Debian's linux-source, make deps); lib.mk rebuilds what changed.
guest-selftests: $(TPURT_SO)
	$(quiet) KSFT $(GUEST_KSELFTEST)
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

# --- host benchmarks (bench/): figures beside their anchors, never timed tests ---
BENCH_CFLAGS	= $(BASE_CFLAGS) -Iqemu-device/engine -Irules $(BLAS_CFLAGS)

$(BUILD)/bench/%: bench/%.c $(ENGINE_LIB) $(RULES_LIB)
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(BENCH_CFLAGS) -o $@ $< $(BENCH_EXTRA) $(ENGINE_LINK) -lm

bench-gemm: $(BUILD)/bench/bench_gemm
	$(Q)$<

# In the VM; host OpenBLAS runs before and after it as the anchor.
bench: deps
	$(Q)$(MAKE) --no-print-directory all $(BUILD)/bench/bench_openblas
	$(Q)scripts/bench-matmul.sh

$(BUILD)/bench/bench_openblas: bench/bench_openblas.c
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(BASE_CFLAGS) $(BLAS_CFLAGS) -o $@ $< $(BLAS_LIBS)

# In the VM; the host's memcpy anchor runs before and after it.
bench-dma: deps
	$(Q)$(MAKE) --no-print-directory all $(BUILD)/bench/bench_memcpy
	$(Q)scripts/bench-dma.sh

$(GUEST_BIN)/%: bench/%.c $(TPURT_SO)
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(PROG_CFLAGS) -o $@ $< $(TPURT_LINK)

$(SIM_TESTS:%=$(BUILD)/tests/%): $(TPURT_SIM_LIB)
$(SIM_TESTS:%=$(BUILD)/tests/%): TEST_EXTRA = $(TPURT_SIM_LIB) -luring

$(GUEST_BIN)/bench_submit: selftests/tpu_job_blob.h

# Job submission paths in the VM: ioctl (the anchor) and io_uring batches.
bench-submit: module userspace
	$(Q)scripts/vm-run.sh --timeout 300 -- bench_submit

# Engine jobs are the tests' matmul kernels, from the job builder.
$(BUILD)/bench/bench_engine: $(TEST_HELPERS) tests/job_builder.h
$(BUILD)/bench/bench_engine: BENCH_EXTRA = -Itests $(TEST_HELPERS)

bench-engine: $(BUILD)/bench/bench_engine
	$(Q)$<

# The vector unit's row kernels beside the host's memcpy of the same bytes.
.PHONY: bench-vec
bench-vec: $(BUILD)/bench/bench_vec
	$(Q)$<

# Flash attention and softmax (the samples' kernels) on the in-process
# device, beside host OpenBLAS and memcpy in the same run.
$(BUILD)/bench/bench_attention: $(SAMPLE_DEPS) $(TPURT_SIM_LIB)
$(BUILD)/bench/bench_attention: BENCH_EXTRA = -Ilibtpurt/include -Isamples \
	$(SAMPLE_HELPERS) $(TPURT_SIM_LIB) $(DRM_LIBS) -luring

bench-attention: $(BUILD)/bench/bench_attention
	$(Q)$<

# The model reads the published table next to the tests; the path is fixed
# at build time so the test runs from any directory.
$(BUILD)/tests/engine_model_test: tools/published.c tools/published.h $(PUBLISHED_TSV)
$(BUILD)/tests/engine_model_test: TEST_EXTRA = -Itools tools/published.c \
	-DPUBLISHED_TSV='"$(CURDIR)/$(PUBLISHED_TSV)"' -lm

$(TOOL_BIN)/%: tools/%.c tools/published.c tools/published.h $(ENGINE_LIB) $(RULES_LIB)
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(ENGINE_CFLAGS) -Itools -o $@ $< tools/published.c $(ENGINE_LINK) -lm

# The device parameters' table (uapi/tpu_params.h) as README and check.sh use it.
$(TOOL_BIN)/tpurt-params: tools/tpurt-params.c uapi/tpu_params.h uapi/tpu_drm.h
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(BASE_CFLAGS) $(DRM_CFLAGS) -o $@ $<

# README's table of parameters is what tpurt-params prints.
$(BUILD)/tests/params_table_test: $(TOOL_BIN)/tpurt-params README.md
$(BUILD)/tests/params_table_test: TEST_EXTRA = \
	-DPARAMS_TOOL='"$(CURDIR)/$(TOOL_BIN)/tpurt-params"' -DREADME='"$(CURDIR)/README.md"'

# The published v5e table beside the model's figures (no VM, instant).
model-table: $(TOOL_BIN)/tpurt-model
	$(Q)$(TOOL_BIN)/tpurt-model --table $(PUBLISHED_TSV)

module:
	$(Q)$(MAKE) -C $(KDIR) M=$(CURDIR) modules $(if $(filter 1,$(V)),,-s)

qemu:
	$(Q)scripts/build-qemu.sh

# QEMU_DEVICE_OPTS=hbm-size=2G,cores=2 passes tpu-mxu properties; ACCEL=kvm.
# The samples print PASS or FAIL; the run fails if any fails.
RUN_SAMPLES	= rc=0; for s in $(SAMPLES); do $$s || rc=1; done; exit $$rc
run: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/vm-run.sh --timeout 600 -- '$(RUN_SAMPLES)'

shell: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/vm-run.sh --shell

check: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/check.sh

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

-include $(RULES_OBJS:.o=.d) $(ENGINE_OBJS:.o=.d) $(TPURT_SIM_OBJS:.o=.d) $(BUILD)/libtpurt/nosim.d
