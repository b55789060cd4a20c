#!/bin/sh
# Builds and runs the C program in README.md's "One token through the API"
# section, as C11 and as C++17, each with -Werror -Wall -Wextra, against
# the installed SDK found by pkg-config (tensafe-lora), and checks that it
# prints a non-zero delta. CI runs it after `make install`.
#   scripts/readme-snippet.sh [README]
set -u
readme=${1:-$(dirname "$0")/../README.md}
CC=${CC:-cc}
CXX=${CXX:-c++}
fail() { echo "readme-snippet: FAIL: $*"; exit 1; }

pkg-config --exists tensafe-lora || fail "pkg-config does not find tensafe-lora (set PKG_CONFIG_PATH)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/readme-snippet.XXXXXX") || fail mktemp
trap 'rm -rf "$tmp"' EXIT INT TERM
# the first ```c block after the section heading
awk '/^## One token through the API/ { sec = 1; next }
     sec && /^## / { exit }
     sec && /^```c$/ { on = 1; next }
     on && /^```$/ { exit }
     on { print }' "$readme" >"$tmp/readme.c"
[ -s "$tmp/readme.c" ] || fail "no \`\`\`c block under '## One token through the API' in $readme"
cp "$tmp/readme.c" "$tmp/readme.cpp"
flags="-Werror -Wall -Wextra $(pkg-config --cflags tensafe-lora)"
libs="$(pkg-config --libs tensafe-lora)"
# shellcheck disable=SC2086
"$CC" -std=c11 $flags -o "$tmp/readme-c" "$tmp/readme.c" $libs 2>"$tmp/cc.log" ||
    fail "C11 build: $(cat "$tmp/cc.log")"
# shellcheck disable=SC2086
"$CXX" -std=c++17 $flags -o "$tmp/readme-cxx" "$tmp/readme.cpp" $libs 2>"$tmp/cxx.log" ||
    fail "C++17 build: $(cat "$tmp/cxx.log")"
for b in readme-c readme-cxx; do
    out=$("$tmp/$b" 2>&1) || fail "$b exited non-zero: $out"
    echo "$out" | grep -Eq '^delta\[0\] = [^ ]+, max \|delta\| = [0-9.]*[1-9]' ||
        fail "$b printed no non-zero delta: $out"
    echo "readme-snippet: $b ($(wc -l <"$tmp/readme.c") lines): $out"
done
