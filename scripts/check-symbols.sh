#!/bin/sh
# Every symbol a built library exports starts with tsafe_ (STYLE.md rule 1):
# a static archive puts every non-static function in the user's link
# namespace, so an unprefixed helper there collides with the host's own.
#
#   scripts/check-symbols.sh [LIBDIR]
#
# LIBDIR (default build/lib) holds libtensafe-*.a and libtensafe-*.so.*.
# Checked: global defined symbols (nm -g --defined-only) of each archive
# and the dynamic symbols (nm -D --defined-only) of each shared library.
# Exceptions, kept tiny and each justified:
#   - linker/runtime names the toolchain defines in every .so: _init, _fini,
#     _edata, _end, __bss_start;
#   - what nvcc generates for the CUDA library's device code: the per-file
#     fatbinary registration (__cudaRegisterLinkedBinary_*, __fatbinwrap_*,
#     __nv_*, __cuda*), which the CUDA runtime looks up by those names, and
#     the host stub of each tsafe_ kernel (__device_stub__Z<n>tsafe_...);
#   - C++ (the .cu files): names are read demangled (nm -C), so tsafe_f(int)
#     and tsafe_guard::~tsafe_guard() pass; "(anonymous namespace)::" names
#     are file-local by the language (nvcc gives them a per-file hashed
#     namespace, so they cannot collide) and DW.ref.__gxx_personality_v0 is
#     the C++ runtime's exception-handling reference.
# Exits 1 listing each offending symbol with its library, 2 when there is
# nothing to check.
libdir="${1:-build/lib}"
command -v nm >/dev/null 2>&1 || { echo "check-symbols: nm not found" >&2; exit 2; }

allowed='^(tsafe_|_init$|_fini$|_edata$|_end$|__bss_start$|__cudaRegisterLinkedBinary_|__fatbinwrap_|__nv_|__cuda|__device_stub__Z[0-9]+tsafe_|\(anonymous namespace\)::|DW\.ref\.__gxx_personality_v0$)'

found=0; bad=0; total=0
tmp=$(mktemp "${TMPDIR:-/tmp}/check-symbols.XXXXXX") || exit 2
trap 'rm -f "$tmp"' EXIT INT TERM
for lib in "$libdir"/libtensafe-*.a "$libdir"/libtensafe-*.so.*.*.*; do
  [ -f "$lib" ] || continue
  [ -L "$lib" ] && continue
  found=$((found + 1))
  case "$lib" in
    *.a) nm -g -C --defined-only "$lib" ;;
    *)   nm -D -C --defined-only "$lib" ;;
  esac 2>/dev/null | sed -n -E 's/^[0-9a-fA-F]* +[A-Za-z] //p' | sort -u > "$tmp"
  n=$(wc -l < "$tmp" | tr -d ' ')
  total=$((total + n))
  grep -Ev "$allowed" "$tmp" | while IFS= read -r sym; do
    echo "  $(basename "$lib"): $sym"
  done > "$tmp.bad"
  if [ -s "$tmp.bad" ]; then
    cat "$tmp.bad"
    bad=$((bad + $(wc -l < "$tmp.bad")))
  fi
  rm -f "$tmp.bad"
done
[ "$found" -gt 0 ] || { echo "check-symbols: no libtensafe-*.a / .so.* in $libdir (run make libs)" >&2; exit 2; }
if [ "$bad" -gt 0 ]; then
  echo "check-symbols: $bad exported symbol(s) without the tsafe_ prefix (make them static, or rename to tsafe_<module>_...)"
  exit 1
fi
echo "check-symbols: $total exported symbols in $found libraries, all tsafe_-prefixed"
