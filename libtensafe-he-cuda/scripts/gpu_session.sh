#!/bin/sh
# What a session with a lent GPU runs for the CUDA backend (issue 5).
#
#   sh libtensafe-he-cuda/scripts/gpu_session.sh prepare   # here (no GPU needed)
#   then, with the device tool (repository root there):
#     command: sh libtensafe-he-cuda/scripts/gpu_session.sh run [STEPS]
#     (STEPS: any of conformance memcheck racecheck synccheck bench; default
#     all -- split them over several calls if one call nears the 10-minute
#     limit)
#     carry:   ["build/tests/test_cuda_conformance", "build/gpu-carry"]
#
# prepare: builds the conformance test (static TenSafe libraries, sm_80 +
#   sm_90 + PTX) and copies the shared libraries the device image lacks
#   (GMP, FFTW3, libsodium, cmocka) into build/gpu-carry/lib.
# run: on the device machine: the conformance test (every vtable op, CPU vs
#   CUDA bit for bit, graph capture + replay), compute-sanitizer memcheck,
#   racecheck and synccheck, then the full benchmark (TSAFE_CUDA_BENCH=1).
#   Logs go to $OUT (or build/gpu-out); a summary table is printed last.
set -u
mode="${1:-}"
case "$mode" in
prepare)
    set -e
    make build/tests/test_cuda_conformance
    rm -rf build/gpu-carry
    mkdir -p build/gpu-carry/lib
    for lib in $(ldd build/tests/test_cuda_conformance | awk '/=> \//{print $3}'); do
        case "$(basename "$lib")" in
        libgmp*|libfftw3*|libsodium*|libcmocka*) cp -L "$lib" build/gpu-carry/lib/ ;;
        esac
    done
    ls -la build/gpu-carry/lib
    du -sh build/tests/test_cuda_conformance build/gpu-carry
    ;;
run)
    out="${OUT:-build/gpu-out}"
    mkdir -p "$out"
    export LD_LIBRARY_PATH="$PWD/build/gpu-carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    t=build/tests/test_cuda_conformance
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
    status() { if [ "$1" -eq 0 ]; then echo ok; else echo "FAILED ($1)"; fi; }
    shift
    steps="${*:-conformance memcheck racecheck synccheck bench}"
    want() { case " $steps " in *" $1 "*) return 0;; esac; return 1; }
    r_conf=0; r_mem=0; r_race=0; r_sync=0; r_bench=0
    if want conformance; then
        $t > "$out/conformance.log" 2>&1; r_conf=$?
        # on a GPU machine nothing may skip
        if grep -q "skipped: no CUDA device" "$out/conformance.log"; then r_conf=98; fi
    fi
    cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
    for tool in memcheck racecheck synccheck; do
        want $tool || continue
        if [ -n "$cs" ]; then
            $cs --tool $tool --error-exitcode 99 $t > "$out/$tool.log" 2>&1; r=$?
        else
            r=127
        fi
        case $tool in memcheck) r_mem=$r;; racecheck) r_race=$r;; synccheck) r_sync=$r;; esac
    done
    if want bench; then
        TSAFE_CUDA_BENCH=1 $t > "$out/bench.log" 2>&1; r_bench=$?
    fi
    echo "== device";       cat "$out/gpu.txt"
    echo "== conformance";  grep -E "SEED|PASSED|FAILED|SKIPPED|differs|error" "$out/conformance.log" 2>/dev/null | head -30
    echo "== sanitizers";   for f in memcheck racecheck synccheck; do
                                echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$f.log" 2>/dev/null | tail -1)"; done
    echo "== bench";        grep -A6 "^bench " "$out/bench.log" 2>/dev/null
    echo "steps: $steps"
    echo "conformance $(status $r_conf); memcheck $(status $r_mem); racecheck $(status $r_race); synccheck $(status $r_sync); bench $(status $r_bench)"
    [ $r_conf -eq 0 ] && [ $r_mem -eq 0 ] && [ $r_race -eq 0 ] && [ $r_sync -eq 0 ] && [ $r_bench -eq 0 ]
    ;;
*)
    echo "usage: $0 prepare|run" >&2
    exit 2
    ;;
esac
