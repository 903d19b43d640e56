# SPDX-License-Identifier: MIT
# libFuzzer targets (fuzz/): each is built with clang under ASan and UBSan
# from the sources it tests, never from the gcc-built archives.
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="job_decode ..."]
#   make fuzz-check          (a few seconds each + the committed corpus; TAP)
#   make fuzz-seeds          (rewrite fuzz/corpus/ from tests/job_builder)

FUZZ_CC		?= clang-14
FUZZ_TARGETS	?= job_decode scalar engine_job dma_copy driver_check
FUZZ_SECONDS	?= 60
FUZZ_CHECK_SECONDS ?= 3
FUZZ_DIR	= $(BUILD)/fuzz
FUZZ_SAN	= -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS	= -std=gnu11 -D_GNU_SOURCE -g -O1 -Wall -Werror -Iuapi -Irules \
		  -Iqemu-device/engine -Itests -Ifuzz $(BLAS_CFLAGS)
FUZZ_BINS	= $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

# Objects of the code under test, compiled by clang with the sanitizers.
fuzz_objs	= $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(1))
FUZZ_RULES	= $(call fuzz_objs,$(RULES_SRCS))
FUZZ_ENGINE	= $(call fuzz_objs,$(ENGINE_SRCS))
FUZZ_COPY	= $(call fuzz_objs,$(addprefix qemu-device/engine/,tpu_copy.c \
			tpu_guest_mem.c tpu_stream.c))
FUZZ_JOBS	= $(call fuzz_objs,fuzz/fuzz_jobs.c tests/job_builder.c)
$(FUZZ_ENGINE): FUZZ_CFLAGS += -include fuzz/clang_cpu.h
$(FUZZ_ENGINE): fuzz/clang_cpu.h
# clang ignores the ISA files' "#pragma GCC target", so sleef.h would not
# declare their functions: give those two files the ISA as flags.
$(call fuzz_objs,qemu-device/engine/tpu_vec_avx2.c): FUZZ_CFLAGS += -mavx2 -mfma \
	-Wno-unknown-pragmas
$(call fuzz_objs,qemu-device/engine/tpu_vec_avx512.c): FUZZ_CFLAGS += \
	-mavx512f -mavx512dq -mavx2 -mfma -Wno-unknown-pragmas

# The driver's check for userspace: fuzz/kshim/ stands in for the kernel.
FUZZ_DRIVER	= $(FUZZ_DIR)/obj/driver/tpu_job_check.o

.PHONY: fuzz fuzz-check fuzz-seeds
.SECONDARY: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/obj/fuzz/fuzz_%.o)

$(FUZZ_DIR)/obj/%.o: %.c
	$(quiet) FUZZCC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -MMD -MP -c -o $@ $<

$(FUZZ_DRIVER): driver/tpu_job_check.c fuzz/kshim/kshim.h
	$(quiet) FUZZCC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -Ifuzz/kshim -include kshim.h \
		-MMD -MP -c -o $@ $<

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/fuzz/fuzz_%.o
	$(quiet) LD $@
	$(Q)$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ $(FUZZ_LIBS)

$(FUZZ_DIR)/fuzz_job_decode: $(FUZZ_RULES)
$(FUZZ_DIR)/fuzz_scalar: $(FUZZ_RULES)
$(FUZZ_DIR)/fuzz_engine_job: $(FUZZ_ENGINE) $(FUZZ_RULES) $(FUZZ_JOBS)
# the libraries the engine links, as the project's own builds have them
$(FUZZ_DIR)/fuzz_engine_job: FUZZ_LIBS = $(filter-out $(ENGINE_LIB) $(RULES_LIB),$(ENGINE_LINK))
$(FUZZ_DIR)/fuzz_dma_copy: $(FUZZ_COPY)
$(FUZZ_DIR)/fuzz_driver_check: $(FUZZ_DRIVER) $(FUZZ_RULES)

fuzz: $(FUZZ_BINS)
	$(Q)fuzz/run.sh fuzz $(FUZZ_SECONDS) $(FUZZ_DIR) $(FUZZ_TARGETS)

fuzz-check: $(FUZZ_BINS)
	$(Q)fuzz/run.sh check $(FUZZ_CHECK_SECONDS) $(FUZZ_DIR) $(FUZZ_TARGETS)

# The seed writer is a plain host program on the project's own archives.
$(FUZZ_DIR)/fuzz-seeds: fuzz/fuzz_seeds.c fuzz/fuzz_jobs.c $(TEST_HELPERS) \
		$(ENGINE_LIB) $(RULES_LIB)
	$(quiet) CC $@
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(ENGINE_CFLAGS) -Itests -Ifuzz -o $@ $< fuzz/fuzz_jobs.c \
		$(TEST_HELPERS) $(ENGINE_LINK) -lm

fuzz-seeds: $(FUZZ_DIR)/fuzz-seeds
	$(Q)$< fuzz/corpus

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
