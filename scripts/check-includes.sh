#!/bin/sh
# The include rule of docs/ARCHITECTURE.md, checked on every quoted
# #include "..." line of the sources (angle-bracket includes are system or
# third-party headers and are not checked).
#
#   scripts/check-includes.sh [ALLOW_FILE]
#
# Each quoted include is resolved the way the Makefile's -I flags resolve
# it: next to the including file, else include/ (public tensafe/*.h), else
# libtensafe-he-core/src/common/ (the internal common, on every library's
# path), else tests/ (tests' -Itests). Then, by the folder of the including
# file (the "from") and of the included one (the "to"):
#   include/tensafe/   may include only public headers;
#   examples/          only public headers;
#   tools/             public headers, the internal common (core's
#                      src/common/: the tool links the static archives) and
#                      tools/'s own;
#   tests/             anything (white-box tests), but nothing includes tests/
#                      except tests/;
#   a library's src/   public headers, the internal common (core's
#                      src/common/), and its own library's headers: in its
#                      own module (folder), or a header another module of
#                      the same library lists as its library-internal
#                      interface (the INTERFACE list below). Never another
#                      library's private header.
# ALLOW_FILE (default scripts/include-allow.txt) lists accepted exceptions,
# one "FROM TO" pair of repository paths a line, # comments; each states why
# and, when temporary, the branch that removes it. An entry that no longer
# matches an include is reported too (stale), so the list only shrinks.
# Exits 1 listing violations, 2 on a usage error.
cd "$(dirname "$0")/.." || exit 2
allow="${1:-scripts/include-allow.txt}"
[ -r "$allow" ] || { echo "check-includes: cannot read $allow" >&2; exit 2; }

# Library-internal interfaces: private headers that other modules of the
# same library may include (the core is one layered library: common <- ring
# <- ckks, bfv <- backend, and backend_internal.h is the dispatch hook the
# schemes call; in lora, adapter objects are built by the package module,
# both protocols frame through the wire module, every engine keys its
# prepared forms on modules (engine/), the in-process pair runs sessions and
# the sealed client adds DP noise to its shares itself (dp/dp_release.h).
INTERFACE='
libtensafe-he-core/src/ring/ring.h
libtensafe-he-core/src/ckks/ckks_internal.h
libtensafe-he-core/src/bfv/bfv_internal.h
libtensafe-he-core/src/backend/backend_internal.h
libtensafe-lora/src/adapter/adapter_internal.h
libtensafe-lora/src/adapter/detail.h
libtensafe-lora/src/wire/wire.h
libtensafe-lora/src/wire/frame.h
libtensafe-lora/src/engine/engine_internal.h
libtensafe-lora/src/session/session_internal.h
libtensafe-lora/src/dp/dp_release.h
'
COMMON=libtensafe-he-core/src/common

# normalise a/b/../c -> a/c, ./ removed
norm() {
  printf '%s\n' "$1" | awk -F/ '{
    n = 0
    for (i = 1; i <= NF; i++) {
      if ($i == "." || $i == "") continue
      if ($i == ".." && n > 0 && p[n] != "..") { n--; continue }
      p[++n] = $i
    }
    s = p[1]; for (i = 2; i <= n; i++) s = s "/" p[i]; print s }'
}

# library name of a path under libtensafe-*/src, else empty
lib_of() { case "$1" in libtensafe-*/src/*) printf '%s\n' "${1%%/src/*}";; esac; }
# module (first folder under src/, "." for files directly in src/)
mod_of() {
  rest=${1#*/src/}
  case "$rest" in */*) printf '%s\n' "${rest%%/*}";; *) echo .;; esac
}

tmp=$(mktemp "${TMPDIR:-/tmp}/check-includes.XXXXXX") || exit 2
trap 'rm -f "$tmp" "$tmp.used"' EXIT INT TERM
: > "$tmp.used"

check() { # from to -> prints a reason when the include is not allowed
  from=$1; to=$2
  case "$to" in include/tensafe/*) return 0;; esac
  case "$from" in
    include/*) echo "public header includes a private one"; return;;
    examples/*) echo "an example uses only the public API"; return;;
    tests/*) return 0;;
  esac
  case "$to" in tests/*) echo "only tests include tests/"; return;; esac
  case "$from" in
    tools/*)
      case "$to" in tools/*|"$COMMON"/*) return 0;; esac
      echo "tools use only public headers, the internal common and their own"; return;;
  esac
  flib=$(lib_of "$from"); tlib=$(lib_of "$to")
  [ -n "$flib" ] || { echo "unclassified folder"; return; }
  case "$to" in "$COMMON"/*) return 0;; esac
  [ "$flib" = "$tlib" ] || { echo "another library's private header"; return; }
  [ "$(mod_of "$from")" = "$(mod_of "$to")" ] && return 0
  case "$INTERFACE" in *"
$to
"*) return 0;; esac
  echo "another module's private header (not a library-internal interface)"
}

find include libtensafe-*/src tools tests examples -type f \
     \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \) |
  sort | while IFS= read -r f; do
  sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
  while IFS= read -r inc; do
    dir=$(dirname "$f")
    if [ -f "$dir/$inc" ]; then to=$(norm "$dir/$inc")
    elif [ -f "include/$inc" ]; then to=$(norm "include/$inc")
    elif [ -f "$COMMON/$inc" ]; then to=$(norm "$COMMON/$inc")
    elif [ -f "tests/$inc" ]; then to=$(norm "tests/$inc")
    else echo "$f: #include \"$inc\": cannot resolve"; continue; fi
    why=$(check "$f" "$to")
    [ -n "$why" ] || continue
    if grep -v '^[[:space:]]*#' "$allow" | awk -v a="$f" -v b="$to" '$1 == a && $2 == b { hit = 1 } END { exit !hit }'; then
      echo "$f $to" >> "$tmp.used"
      continue
    fi
    echo "$f: #include \"$inc\" ($to): $why"
  done
done > "$tmp"

# allow-list entries that match nothing any more
grep -v '^[[:space:]]*#' "$allow" | awk 'NF >= 2 { print $1, $2 }' | while read -r a b; do
  grep -qxF "$a $b" "$tmp.used" || echo "$allow: stale entry '$a $b' (no such include now: remove it)"
done >> "$tmp"

if [ -s "$tmp" ]; then
  cat "$tmp"
  echo "check-includes: $(wc -l < "$tmp" | tr -d ' ') violation(s) of the include rule (docs/ARCHITECTURE.md)"
  exit 1
fi
echo "check-includes: include rule holds ($(sort -u "$tmp.used" | wc -l | tr -d ' ') allow-listed exception(s) in $allow)"
