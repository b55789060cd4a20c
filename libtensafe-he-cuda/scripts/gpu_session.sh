#!/bin/sh
# What a session with a lent GPU runs for the CUDA backend (issue 5).
#
#   sh libtensafe-he-cuda/scripts/gpu_session.sh prepare   # here (no GPU needed)
#   then, with the device tool (repository root there):
#     command: sh libtensafe-he-cuda/scripts/gpu_session.sh run [STEPS]
#     (STEPS: any of conformance memcheck racecheck synccheck bench tool serve
#     model profile; default all but serve, model and profile -- split them over several calls
#     if one call nears the 10-minute limit)
#     carry:   ["build/tests/test_cuda_conformance", "build/tests/test_cuda_seal",
#               "build/gpu-carry"]
#
# prepare: builds the conformance test (static TenSafe libraries, sm_80 +
#   sm_90 + PTX) and the tool, and packs every shared library they load
#   except glibc's into build/gpu-carry/lib.tar.xz (the device image is
#   another distribution and lacks most of them).
# run: on the device machine: the conformance test (every vtable op, CPU vs
#   CUDA bit for bit, graph capture + replay) and the batched sealing test
#   (test_cuda_seal: seal_batch and ct_read on the GPU against the CPU), compute-sanitizer memcheck,
#   racecheck and synccheck, the full benchmark (TSAFE_CUDA_BENCH=1), then
#   the tool: `bench cuda`, `bench lora --backend cuda`, a CUDA-backed demo.
#   serve (named only): `tensafe bench serve --backend cuda`, batched
#   sessions at 1..4096 sites on the GPU against the CPU on all 16 threads,
#   interleaved in one run (issue 21; SERVE_LIMIT seconds, default 300).
#   profile (named only): `bench serve --backend cuda --protocol P` for each
#   protocol with TSAFE_CUDA_PROFILE=1 (where the host threads spend their
#   time in backend calls, per token); with PROFILE_BLOCKING=1 sealed-private
#   again with TSAFE_CUDA_SYNC=blocking (threads sleep, not spin, on the device).
#   Logs go to $OUT (or build/gpu-out); a summary table is printed last.
set -u
mode="${1:-}"
case "$mode" in
prepare)
    set -e
    make build/tests/test_cuda_conformance build/tests/test_cuda_seal build/bin/tensafe
    rm -rf build/gpu-carry
    mkdir -p build/gpu-carry/lib build/gpu-carry/bin
    cp build/bin/tensafe build/gpu-carry/bin/
    # every shared library but glibc's own: the device image is another
    # distribution (its glibc is newer, so Debian 12's libraries load there)
    for lib in $(ldd build/tests/test_cuda_conformance build/tests/test_cuda_seal build/bin/tensafe |
                 awk '/=> \//{print $3}' | sort -u); do
        case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;;
        *) cp -L "$lib" build/gpu-carry/lib/ ;;
        esac
    done
    # OpenBLAS alone is 36 MB: the libraries travel compressed (carry limit)
    tar -C build/gpu-carry/lib -cJf build/gpu-carry/lib.tar.xz .
    rm -rf build/gpu-carry/lib
    du -sh build/tests/test_cuda_conformance build/tests/test_cuda_seal build/gpu-carry
    ;;
run)
    out="${OUT:-build/gpu-out}"
    mkdir -p "$out"
    libdir=/tmp/tensafe-gpu-lib
    mkdir -p "$libdir" && tar -C "$libdir" -xJf build/gpu-carry/lib.tar.xz
    export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    t=build/tests/test_cuda_conformance
    tsafe_tool=build/gpu-carry/bin/tensafe
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv > "$out/gpu.txt" 2>&1
    ldd --version 2>&1 | head -1 >> "$out/gpu.txt"
    # each step has a time limit so that one slow tool cannot eat the lease
    lim() { s=$1; shift; timeout "$s" "$@"; }
    status() { if [ "$1" -eq 0 ]; then echo ok; else echo "FAILED ($1)"; fi; }
    shift
    steps="${*:-conformance memcheck racecheck synccheck bench tool}"
    want() { case " $steps " in *" $1 "*) return 0;; esac; return 1; }
    r_conf=0; r_mem=0; r_race=0; r_sync=0; r_bench=0; r_tool=0; r_serve=0; r_model=0; r_prof=0
    if want conformance; then
        lim 120 $t > "$out/conformance.log" 2>&1; r_conf=$?
        lim 120 build/tests/test_cuda_seal >> "$out/conformance.log" 2>&1 || r_conf=$?
        # on a GPU machine nothing may skip
        if grep -q "skipped: no CUDA device" "$out/conformance.log"; then r_conf=98; fi
    fi
    cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
    for tool in memcheck racecheck synccheck; do
        want $tool || continue
        if [ -n "$cs" ]; then
            TSAFE_CUDA_BENCH_SKIP=1 timeout "${SANITIZER_LIMIT:-150}" $cs --tool $tool --report-api-errors no --error-exitcode 99 $t > "$out/$tool.log" 2>&1; r=$?
            [ $r -eq 0 ] && { timeout "${SANITIZER_LIMIT:-150}" $cs --tool $tool --report-api-errors no --error-exitcode 99 build/tests/test_cuda_seal >> "$out/$tool.log" 2>&1; r=$?; }
        else
            r=127
        fi
        case $tool in memcheck) r_mem=$r;; racecheck) r_race=$r;; synccheck) r_sync=$r;; esac
    done
    if want bench; then
        TSAFE_CUDA_BENCH=1 timeout 120 $t > "$out/bench.log" 2>&1; r_bench=$?
    fi
    if want tool; then
        # the tool on the device: its CUDA bench, the per-site LoRA bench
        # with the servers' ring work on the GPU, and a sealed-private demo
        { lim 90 $tsafe_tool bench cuda && \
          OPENBLAS_NUM_THREADS=1 timeout 120 $tsafe_tool bench lora --backend cuda && \
          lim 120 $tsafe_tool demo --backend cuda --tokens 8; } > "$out/tool.log" 2>&1
        r_tool=$?
    fi
    if want model; then
        # whole-model tokens (Qwen2.5-1.5B, Qwen3-30B-A3B) with the servers on the GPU
        OPENBLAS_NUM_THREADS=1 timeout ${MODEL_LIMIT:-150} $tsafe_tool bench model --quick --backend cuda > "$out/model.log" 2>&1
        r_model=$?
    fi
    if want serve; then
        OPENBLAS_NUM_THREADS=1 timeout ${SERVE_LIMIT:-300} $tsafe_tool bench serve --backend cuda > "$out/serve.log" 2>&1
        r_serve=$?
    fi
    if want profile; then
        for p in sealed sealed-private; do
            TSAFE_CUDA_PROFILE=1 OPENBLAS_NUM_THREADS=1 timeout ${PROFILE_LIMIT:-150} $tsafe_tool bench serve \
                --backend cuda --protocol $p > "$out/profile-$p.log" 2>&1 || r_prof=$?
        done
        if [ -n "${PROFILE_BLOCKING:-}" ]; then
            TSAFE_CUDA_SYNC=blocking TSAFE_CUDA_PROFILE=1 OPENBLAS_NUM_THREADS=1 timeout ${PROFILE_LIMIT:-150} \
                $tsafe_tool bench serve --backend cuda --protocol sealed-private \
                > "$out/profile-blocking.log" 2>&1 || r_prof=$?
        fi
    fi
    echo "== device";       cat "$out/gpu.txt"
    echo "== conformance";  grep -E "SEED|PASSED|FAILED|SKIPPED|differs|error" "$out/conformance.log" 2>/dev/null | head -30
    echo "== sanitizers";   for f in memcheck racecheck synccheck; do
                                echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$f.log" 2>/dev/null | tail -1)"; done
    echo "== bench";        grep -A6 "^bench " "$out/bench.log" 2>/dev/null
    echo "== tool";         grep -E "cuda|sealed|per token|error|tensafe:" "$out/tool.log" 2>/dev/null | head -40
    echo "== serve";        grep -E "sealed|cuda" "$out/serve.log" 2>/dev/null | head -60
    echo "== model";        grep -E "sealed|Qwen" "$out/model.log" 2>/dev/null | head -20
    for f in profile-sealed profile-sealed-private profile-blocking; do
        [ -f "$out/$f.log" ] || continue
        echo "== $f";  grep -E "cuda, |profile, batch (224|1344|4096) " "$out/$f.log" | head -70
    done
    echo "steps: $steps"
    echo "conformance $(status $r_conf); memcheck $(status $r_mem); racecheck $(status $r_race); synccheck $(status $r_sync); bench $(status $r_bench); tool $(status $r_tool); serve $(status $r_serve); model $(status $r_model); profile $(status $r_prof)"
    [ $r_conf -eq 0 ] && [ $r_mem -eq 0 ] && [ $r_race -eq 0 ] && [ $r_sync -eq 0 ] && [ $r_bench -eq 0 ] && [ $r_tool -eq 0 ] && [ $r_serve -eq 0 ] && [ $r_model -eq 0 ] && [ $r_prof -eq 0 ]
    ;;
*)
    echo "usage: $0 prepare|run" >&2
    exit 2
    ;;
esac
