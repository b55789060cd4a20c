# TenSafe-HE SDK -- the one entry point.
#
#   make            libraries (static + shared), the tensafe tool, examples
#   make test       deps, build, run every cmocka suite (CUDA suites skip without a GPU)
#   make demo       deps, build, run `tensafe demo`
#   make bench      benchmark tables (medians)
#   make install    DESTDIR PREFIX LIBDIR INCLUDEDIR PKGCONFIGDIR BINDIR honoured
#   make SAN=1 ...  ASan+UBSan build under build/san
#   make TSAN=1 ... ThreadSanitizer build under build/tsan
#   make CUDA=auto|0|1   build libtensafe-he-cuda when nvcc is found / never / always
#   make fuzz FUZZ_SECONDS=N   libFuzzer targets (clang)
#   make bench-seal SEAL_SRC=DIR   same-run ratios vs Microsoft SEAL built from DIR
#   make mutants [MUTANTS_FILTER=name]   mutation check (tests/mutants/mutants.txt)

VERSION_H := include/tensafe/version.h
MAJOR := $(shell sed -n 's/^\#define TSAFE_VERSION_MAJOR \([0-9]*\)/\1/p' $(VERSION_H))
MINOR := $(shell sed -n 's/^\#define TSAFE_VERSION_MINOR \([0-9]*\)/\1/p' $(VERSION_H))
PATCH := $(shell sed -n 's/^\#define TSAFE_VERSION_PATCH \([0-9]*\)/\1/p' $(VERSION_H))
VERSION := $(MAJOR).$(MINOR).$(PATCH)

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
BINDIR ?= $(PREFIX)/bin
DESTDIR ?=

CC ?= cc
CXX ?= c++
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA ?= auto
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

OPT ?= -O2
WARN := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(OPT) -g -fPIC $(WARN) -Iinclude
# Internal headers shared by the four libraries (and white-box tests).
INTERNAL_INC := -Ilibtensafe-he-core/src/common
LIB_CFLAGS := -fvisibility=hidden -DTSAFE_BUILDING_LIBRARY $(INTERNAL_INC)
SAN_FLAGS :=
BUILD ?= build
ifeq ($(SAN),1)
  SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
  BUILD := build/san
endif
ifeq ($(TSAN),1)
  SAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
  BUILD := build/tsan
endif
CFLAGS_ALL = $(BASE_CFLAGS) $(SAN_FLAGS) $(CFLAGS)
LDFLAGS_ALL = $(SAN_FLAGS) $(LDFLAGS)

# Third-party libraries, in link order for each layer.
CORE_DEPS := -lgmp -lfftw3 -lsodium -lcrypto -lz -lm -lpthread
LORA_DEPS := -ljansson -llapacke -lopenblas
MOE_DEPS :=

# ------------------------------------------------------------------ CUDA
ifeq ($(CUDA),0)
  WITH_CUDA := 0
else ifeq ($(CUDA),1)
  WITH_CUDA := 1
else
  WITH_CUDA := $(if $(NVCC),1,0)
endif
ifneq ($(SAN)$(TSAN),)
  WITH_CUDA := 0
endif
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
NVCCFLAGS ?= -O3 -std=c++17 -Xcompiler -fPIC,-fvisibility=hidden -DTSAFE_BUILDING_LIBRARY \
             -Iinclude $(INTERNAL_INC) $(CUDA_ARCH)
# where libcudart_static.a lives (lib64 is a link to lib in some toolkits);
# tensafe-he-cuda.pc carries it for `pkg-config --static`
CUDA_LIBDIR ?= $(CUDA_HOME)/lib64
CUDA_LIBS := -L$(CUDA_LIBDIR) -lcudart_static -lrt -ldl -lpthread -lstdc++

# nvcc without a driver (a build machine, CI) still builds the library
# (1-2 minutes on a first build; its tests skip): say so, once per build dir
ifeq ($(WITH_CUDA),1)
  CUDA_DRIVER := $(shell ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && echo yes)
endif

# ------------------------------------------------------------- sources
CORE_SRC := $(shell find libtensafe-he-core/src -name '*.c' | sort)
LORA_SRC := $(shell find libtensafe-lora/src -name '*.c' 2>/dev/null | sort)
MOE_SRC := $(shell find libtensafe-moe/src -name '*.c' 2>/dev/null | sort)
CUDA_C_SRC := $(shell find libtensafe-he-cuda/src -name '*.c' 2>/dev/null | sort)
CUDA_CU_SRC := $(shell find libtensafe-he-cuda/src -name '*.cu' 2>/dev/null | sort)
TOOL_SRC := $(shell find tools/tensafe -name '*.c' 2>/dev/null | sort)
TOOL_CXX_SRC := $(shell find tools/tensafe -name '*.cpp' 2>/dev/null | sort)
# the GPU side of `tensafe bench cuda`: built only with the CUDA library
TOOL_CU_SRC := $(if $(filter 1,$(WITH_CUDA)),$(shell find tools/tensafe -name '*.cu' 2>/dev/null | sort))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
CORE_OBJ := $(call obj,$(CORE_SRC))
LORA_OBJ := $(call obj,$(LORA_SRC))
MOE_OBJ := $(call obj,$(MOE_SRC))
CUDA_OBJ := $(call obj,$(CUDA_C_SRC)) $(patsubst %.cu,$(BUILD)/obj/%.o,$(CUDA_CU_SRC))
# tool and test objects see TSAFE_WITH_CUDA: keep each setting's objects apart
TOBJ = $(BUILD)/obj-cuda$(WITH_CUDA)
TOOL_CU_OBJ = $(patsubst %.cu,$(TOBJ)/%.o,$(TOOL_CU_SRC))
TOOL_OBJ = $(patsubst %.c,$(TOBJ)/%.o,$(TOOL_SRC)) $(patsubst %.cpp,$(TOBJ)/%.o,$(TOOL_CXX_SRC)) \
           $(TOOL_CU_OBJ)
# `tensafe generate` tokenizes with SentencePiece (C++, libsentencepiece-dev);
# `tensafe serve` runs its sessions on a libevent loop (libevent-dev)
TOOL_LIBS := -lsentencepiece -lstdc++ -levent_core -levent_pthreads

LIBD := $(BUILD)/lib
# name -> static, shared (real file), soname link, dev link
define libnames
$(1)_A := $(LIBD)/lib$(1).a
$(1)_SO := $(LIBD)/lib$(1).so.$(VERSION)
$(1)_SONAME := lib$(1).so.$(MAJOR)
endef
$(eval $(call libnames,tensafe-he-core))
$(eval $(call libnames,tensafe-lora))
$(eval $(call libnames,tensafe-moe))
$(eval $(call libnames,tensafe-he-cuda))

LIBS_A := $(tensafe-he-core_A) $(tensafe-lora_A) $(tensafe-moe_A)
LIBS_SO := $(tensafe-he-core_SO) $(tensafe-lora_SO) $(tensafe-moe_SO)
PCS := $(BUILD)/pkgconfig/tensafe-he-core.pc $(BUILD)/pkgconfig/tensafe-lora.pc \
       $(BUILD)/pkgconfig/tensafe-moe.pc
ifeq ($(WITH_CUDA),1)
  LIBS_A += $(tensafe-he-cuda_A)
  LIBS_SO += $(tensafe-he-cuda_SO)
  PCS += $(BUILD)/pkgconfig/tensafe-he-cuda.pc
endif

TOOL := $(BUILD)/bin/tensafe
TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
# tests/reference: host references of the servers' ring work (tests only)
TEST_SUPPORT := $(wildcard tests/support/*.c tests/reference/*.c)
TEST_SUPPORT_OBJ = $(patsubst %.c,$(TOBJ)/%.o,$(TEST_SUPPORT))

# Everything a test or the tool links, static, leaf layers first.
LINK_STATIC := $(tensafe-moe_A) $(tensafe-lora_A) $(tensafe-he-core_A) \
               $(MOE_DEPS) $(LORA_DEPS) $(CORE_DEPS)
ifeq ($(WITH_CUDA),1)
  LINK_STATIC := $(tensafe-he-cuda_A) $(LINK_STATIC) $(CUDA_LIBS)
  TEST_CFLAGS := -DTSAFE_WITH_CUDA=1
endif

.PHONY: all libs tool tests test demo demo-valgrind bench bench-seal examples install uninstall clean deps \
        fuzz fuzz-build plots check-tree mutants
.DEFAULT_GOAL := all

all: libs tool examples

libs: $(LIBS_A) $(LIBS_SO) $(PCS)

# ---------------------------------------------------------------- deps
deps:
	@sh scripts/deps.sh

# ------------------------------------------------------------- compile
$(BUILD)/obj/libtensafe-%.o: libtensafe-%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(LIB_CFLAGS) -MMD -MP $(if $(findstring _ifma,$<),-mavx512f -mavx512vl -mavx512ifma -mavx512dq -mavx512bw)$(if $(findstring _avx2,$<), -mavx2 -mfma) -c $< -o $@

$(BUILD)/obj/libtensafe-he-cuda/%.o: libtensafe-he-cuda/%.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(TOBJ)/tools/%.o: tools/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(TEST_CFLAGS) $(INTERNAL_INC) -MMD -MP -c $< -o $@

$(TOBJ)/tools/%.o: tools/%.cpp
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(OPT) -g -fPIC -Wall -Wextra -Iinclude $(SAN_FLAGS) -MMD -MP -c $< -o $@

$(TOBJ)/tools/%.o: tools/%.cu
	@mkdir -p $(@D)
	$(NVCC) -O3 -std=c++17 -Xcompiler -fPIC $(TEST_CFLAGS) -Iinclude $(INTERNAL_INC) $(CUDA_ARCH) -MMD -MP -c $< -o $@

$(TOBJ)/tests/%.o: tests/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(TEST_CFLAGS) $(INTERNAL_INC) -Itests -MMD -MP -c $< -o $@

-include $(shell find $(BUILD)/obj $(TOBJ) -name '*.d' 2>/dev/null)

ifeq ($(WITH_CUDA),1)
$(CUDA_OBJ): | $(BUILD)/.cuda-note
endif
$(BUILD)/.cuda-note:
	@mkdir -p $(@D)
	@$(if $(CUDA_DRIVER),:,echo "make: building libtensafe-he-cuda with $(NVCC) although no NVIDIA driver is installed (its tests will skip; 1-2 min on a first build); make CUDA=0 skips it")
	@touch $@

# ------------------------------------------------------------ archive
$(tensafe-he-core_A): $(CORE_OBJ)
$(tensafe-lora_A): $(LORA_OBJ)
$(tensafe-moe_A): $(MOE_OBJ)
$(tensafe-he-cuda_A): $(CUDA_OBJ)
$(LIBD)/%.a:
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^

# The internal common (libtensafe-he-core/src/common: file reader, clock,
# libsodium start, CPU features...) is hidden in libtensafe-he-core.so, so
# each library above it links its own copy of what it uses from this
# archive (never installed). The static archives need no copy: one
# program links libtensafe-he-core.a, which has them.
COMMON_OBJ := $(filter $(BUILD)/obj/libtensafe-he-core/src/common/%,$(CORE_OBJ))
COMMON_A := $(BUILD)/internal/libtensafe-common.a
$(COMMON_A): $(COMMON_OBJ)
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^

# shared libraries: SONAME = major, with .so.MAJOR and .so links;
# --no-undefined: a symbol no library exports fails here, not at a
# user's link (not in sanitizer builds: their runtime comes with the
# program, so an instrumented .so has its hooks undefined by design)
NO_UNDEFINED = $(if $(strip $(SAN_FLAGS)),,-Wl,--no-undefined)
define shared_rule
$($(1)_SO): $(2) $(3) $(if $(3),$(COMMON_A))
	@mkdir -p $$(@D)
	$$(CC) -shared -Wl,-soname,$($(1)_SONAME) $$(NO_UNDEFINED) $$(LDFLAGS_ALL) -o $$@ $(2) \
	    $(if $(3),$(COMMON_A)) -L$(LIBD) $(4)
	ln -sf lib$(1).so.$(VERSION) $(LIBD)/$($(1)_SONAME)
	ln -sf lib$(1).so.$(VERSION) $(LIBD)/lib$(1).so
endef
$(eval $(call shared_rule,tensafe-he-core,$(CORE_OBJ),,$(CORE_DEPS)))
$(eval $(call shared_rule,tensafe-lora,$(LORA_OBJ),$(tensafe-he-core_SO),-ltensafe-he-core $(LORA_DEPS) $(CORE_DEPS)))
$(eval $(call shared_rule,tensafe-moe,$(MOE_OBJ),$(tensafe-lora_SO),-ltensafe-lora -ltensafe-he-core $(LORA_DEPS) $(CORE_DEPS)))
$(eval $(call shared_rule,tensafe-he-cuda,$(CUDA_OBJ),$(tensafe-he-core_SO),-ltensafe-he-core $(CORE_DEPS) $(CUDA_LIBS)))

# pkg-config files from pkgconfig/*.pc.in
$(BUILD)/pkgconfig/%.pc: pkgconfig/%.pc.in $(VERSION_H)
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    -e 's|@CUDA_LIBDIR@|$(CUDA_LIBDIR)|g' $< > $@

# --------------------------------------------------------------- tool
tool: $(TOOL)
$(TOOL): $(TOOL_OBJ) $(LIBS_A)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_ALL) -o $@ $(TOOL_OBJ) $(LINK_STATIC) $(TOOL_LIBS)

# -------------------------------------------------------------- tests
tests: $(TESTS)
$(BUILD)/tests/%: $(TOBJ)/tests/%.o $(TEST_SUPPORT_OBJ) $(LIBS_A)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(TEST_SUPPORT_OBJ) $(TEST_OBJ_EXTRA) $(LINK_STATIC) $(TEST_EXTRA) -lcmocka

# test_cuda_conformance runs the tool's GPU benchmark (small) on a GPU
ifeq ($(WITH_CUDA),1)
$(BUILD)/tests/test_cuda_conformance: $(TOOL_CU_OBJ)
$(BUILD)/tests/test_cuda_conformance: TEST_OBJ_EXTRA = $(TOOL_CU_OBJ)
endif

# the test_api_null_<header> suites share their fixture and driver
API_NULL_OBJ = $(TOBJ)/tests/api_null/support.o
API_NULL_BINS := $(filter $(BUILD)/tests/test_api_null_%,$(TESTS))
$(API_NULL_BINS): $(API_NULL_OBJ)
$(API_NULL_BINS): TEST_OBJ_EXTRA = $(API_NULL_OBJ)

# test_sealed_adversaries runs its lattice attacks through fplll's C++ LLL
ADV_LLL_OBJ = $(TOBJ)/tests/adversaries/lll_fplll.o
$(ADV_LLL_OBJ): tests/adversaries/lll_fplll.cpp tests/adversaries/lll_fplll.h
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(OPT) -g $(SAN_FLAGS) -Itests -c $< -o $@
$(BUILD)/tests/test_sealed_adversaries: $(ADV_LLL_OBJ)
$(BUILD)/tests/test_sealed_adversaries: TEST_EXTRA = $(ADV_LLL_OBJ) -lfplll -lmpfr -lgmp -lstdc++

# Runs every suite even when one fails, then reports; TESTS_FILTER=name
# runs only suites whose name contains it.
test: deps
	@$(MAKE) --no-print-directory libs tests tool
	@sh scripts/check-api-coverage.sh $(BUILD)/lib
	@sh scripts/run-tests.sh $(BUILD)/tests "$(TESTS_FILTER)"

# Source rules (seconds, no test run): exported symbols prefixed tsafe_,
# the include rule of docs/ARCHITECTURE.md, no function over 80 lines,
# docs/API.md holding every header's signatures as declared.
check-tree: libs
	@sh scripts/check-symbols.sh $(BUILD)/lib
	@sh scripts/check-includes.sh
	@sh scripts/check-functions.sh
	@sh scripts/check-api-doc.sh $(BUILD)/lib

# -------------------------------------------------------------- bench / demo
bench: deps
	@$(MAKE) --no-print-directory tool
	$(TOOL) bench $(BENCH_ARGS)

# The demo (and hosts) run with glibc's transparent-huge-page heap: each
# token reads several MB of plaintext operands per site, spread over
# gigabytes of adapters, and 4 KiB pages made that 107 ms per token against
# 65 ms on the 2-core VM (docs/PERFORMANCE.md). Ignored by other libcs and
# by glibc before 2.35; THP in "never" mode makes it a no-op.
DEMO_ENV ?= GLIBC_TUNABLES=glibc.malloc.hugetlb=1

demo: deps
	@$(MAKE) --no-print-directory tool
	$(DEMO_ENV) $(TOOL) demo --compare $(DEMO_ARGS)

# Memcheck over a short demo (sealed-private, 2 tokens; about 3 minutes on
# the 2-core VM): any error or definite/indirect leak fails.
demo-valgrind: deps
	@$(MAKE) --no-print-directory tool
	valgrind --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite,indirect \
	  $(TOOL) demo --tokens 2 $(DEMO_ARGS)

# SEAL is built from SEAL_SRC (outside the repo) by the script; without it the
# script says what it needs and exits 0.
bench-seal:
	@sh scripts/bench-vs-seal.sh $(SEAL_SRC)

# ------------------------------------------------------------ examples
EXAMPLES_C := $(sort $(wildcard examples/*.c))
ifneq ($(WITH_CUDA),1)
  EXAMPLES_C := $(filter-out examples/cuda_%.c,$(EXAMPLES_C)) # they link libtensafe-he-cuda
endif
EXAMPLES_CXX := $(sort $(wildcard examples/*.cpp))
EXAMPLE_BINS := $(patsubst examples/%.c,$(BUILD)/examples/%,$(EXAMPLES_C)) \
                $(patsubst examples/%.cpp,$(BUILD)/examples/%,$(EXAMPLES_CXX))
examples: $(EXAMPLE_BINS)
$(BUILD)/examples/%: examples/%.c $(LIBS_A)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LINK_STATIC)
$(BUILD)/examples/%: examples/%.cpp $(LIBS_A)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(OPT) -g -Wall -Wextra -Iinclude $(SAN_FLAGS) -o $@ $< $(LINK_STATIC) $(TOOL_LIBS)

# ------------------------------------------------------------ install
HEADERS := $(wildcard include/tensafe/*.h)
install: libs tool
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/tensafe $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(BINDIR)
	install -m 644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/tensafe/
	install -m 644 $(LIBS_A) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(LIBS_SO) $(DESTDIR)$(LIBDIR)/
	for so in $(notdir $(LIBS_SO)); do base=$${so%.so.*}; \
	  ln -sf $$so $(DESTDIR)$(LIBDIR)/$$base.so.$(MAJOR); \
	  ln -sf $$so $(DESTDIR)$(LIBDIR)/$$base.so; done
	for pc in $(notdir $(PCS)); do \
	  sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	      -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	      -e 's|@CUDA_LIBDIR@|$(CUDA_LIBDIR)|g' pkgconfig/$$pc.in > $(DESTDIR)$(PKGCONFIGDIR)/$$pc; done
	install -m 755 $(TOOL) $(DESTDIR)$(BINDIR)/

uninstall:
	rm -rf $(DESTDIR)$(INCLUDEDIR)/tensafe
	for l in tensafe-he-core tensafe-lora tensafe-moe tensafe-he-cuda; do \
	  rm -f $(DESTDIR)$(LIBDIR)/lib$$l.a $(DESTDIR)$(LIBDIR)/lib$$l.so \
	        $(DESTDIR)$(LIBDIR)/lib$$l.so.$(MAJOR) $(DESTDIR)$(LIBDIR)/lib$$l.so.$(VERSION) \
	        $(DESTDIR)$(PKGCONFIGDIR)/$$l.pc; done
	rm -f $(DESTDIR)$(BINDIR)/tensafe

# --------------------------------------------------------------- fuzz
FUZZ_SECONDS ?= 30
FUZZ_BUILD := build/fuzz
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/%,$(FUZZ_SRC))
fuzz-build: deps
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang CUDA=0 \
	  SAN_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" libs
	@for f in $(FUZZ_SRC); do n=$$(basename $$f .c); \
	  clang -std=c11 -D_GNU_SOURCE -O1 -g -Iinclude $(INTERNAL_INC) -Itests -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -o $(FUZZ_BUILD)/$$n $$f $(FUZZ_BUILD)/lib/libtensafe-moe.a $(FUZZ_BUILD)/lib/libtensafe-lora.a \
	    $(FUZZ_BUILD)/lib/libtensafe-he-core.a $(LORA_DEPS) $(CORE_DEPS) || exit 1; done
# One summary line per target; libFuzzer's own output goes to build/fuzz/logs/.
fuzz: fuzz-build
	@sh scripts/fuzz-smoke.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_BINS)

# ------------------------------------------------------------ mutants
# Each mutant of tests/mutants/mutants.txt applied, rebuilt under
# build/mutants (CUDA=0), its suites run with three seeds, the file
# restored; non-zero exit when one survives (scripts/mutants.sh).
mutants: deps
	@sh scripts/mutants.sh tests/mutants/mutants.txt "$(MUTANTS_FILTER)"

# -------------------------------------------------------------- plots
plots: deps
	@$(MAKE) --no-print-directory tool
	@sh scripts/plots.sh $(TOOL)

clean:
	rm -rf build
