#!/usr/bin/env bash
# Fails when an #include crosses a layer it must not. Every tracked C/C++/CUDA source belongs to the
# room (folder) in the table below with the longest matching prefix; a room may include its own
# headers and those of the rooms listed after it, nothing else. A quoted include names a repository
# path ("ps/node/metrics.h"); "zps/..." is include/zps/, and a bare name is a file next to the source.
# Prints each violation as file:line and exits 1; exits 0 with a count when there is none.
# Usage: tools/check-includes.sh                 (ctest: layers/includes)
#        tools/check-includes.sh --print-rooms   the table below
#        tools/check-includes.sh --check-doc     docs/architecture.md shows that table (ctest: layers/architecture_doc)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

# room             may include (besides itself); docs/architecture.md shows this table and the test
#                  layers/architecture_doc fails when the two differ.
ROOMS='
include/zps        -
ps/base            include/zps
kernels            include/zps
proto              -
ps/common          include/zps
ps/wire            include/zps ps/common proto
ps/transport       include/zps ps/common
ps/node            include/zps ps/common proto ps/wire ps/transport
server             include/zps ps/common proto ps/wire ps/transport ps/node kernels
scheduler          include/zps ps/common proto ps/wire ps/transport ps/node
train              include/zps ps/common kernels
worker             include/zps ps/common proto ps/wire ps/transport ps/node kernels
tools              include/zps ps proto kernels server scheduler worker train
tests              include/zps ps proto kernels server scheduler worker train tools
'

rooms() { printf '%s\n' "$ROOMS" | sed '/^$/d'; }
case "${1:-}" in
  --print-rooms) rooms; exit 0 ;;
  # The table in the doc: the ```text block after the line "<!-- rooms: tools/check-includes.sh -->".
  --check-doc)
    doc=$ROOT/docs/architecture.md
    if diff <(rooms) <(sed -n '/^<!-- rooms: tools\/check-includes.sh -->$/,/^```$/p' "$doc" | sed '1,2d;$d'); then
      echo "docs/architecture.md shows the rooms of tools/check-includes.sh"
      exit 0
    fi
    echo "docs/architecture.md's table of rooms (after '<!-- rooms: tools/check-includes.sh -->') differs from" \
         "tools/check-includes.sh's (< script, > doc): copy tools/check-includes.sh --print-rooms into the doc"
    exit 1 ;;
  "") ;;
  *) echo "usage: tools/check-includes.sh [--print-rooms | --check-doc]" >&2; exit 2 ;;
esac

cd "$ROOT"
sources() {
  if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files -- '*.c' '*.cc' '*.cpp' '*.cu' '*.h' '*.hpp' '*.cuh'
  else  # a source tree without git (an unpacked archive): every source but build output
    find . -path ./build -prune -o -path './build-*' -prune -o -type f \( -name '*.c' -o -name '*.cc' \
      -o -name '*.cpp' -o -name '*.cu' -o -name '*.h' -o -name '*.hpp' -o -name '*.cuh' \) -print | sed 's|^\./||'
  fi
}
sources |
  awk -v rooms="$ROOMS" '
    BEGIN {
      n = split(rooms, lines, "\n")
      for (i = 1; i <= n; i++) {
        m = split(lines[i], f, " ")
        if (m < 2) continue
        room[f[1]] = 1
        allowed[f[1]] = f[1]
        for (j = 2; j <= m; j++) if (f[j] != "-") allowed[f[1]] = allowed[f[1]] " " f[j]
      }
    }
    # The room of a repository path: the longest room that is a folder prefix of it ("" when none).
    function roomOf(path,   best, r) {
      best = ""
      for (r in room)
        if (index(path, r "/") == 1 && length(r) > length(best)) best = r
      return best
    }
    # Whether room `from` may include room `to`: itself or listed, or inside a listed folder (a listed
    # "ps" admits ps/node).
    function mayInclude(from, to,   k, m, a) {
      m = split(allowed[from], a, " ")
      for (k = 1; k <= m; k++)
        if (index(to "/", a[k] "/") == 1) return 1
      return 0
    }
    FNR == 1 {
      file = FILENAME
      dir = file; sub(/\/[^\/]*$/, "", dir)
      from = roomOf(file)
      checked++
      if (from == "") { printf "%s: in no room of tools/check-includes.sh (add its folder)\n", file; bad++ }
    }
    from != "" && /^[ \t]*#[ \t]*include[ \t]*"/ {
      inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
      if (inc ~ /^zps\//) target = "include/" inc
      else if (inc !~ /\//) target = dir "/" inc
      else target = inc
      to = roomOf(target)
      if (to == "") {
        printf "%s:%d: #include \"%s\" names no room (write the path from the repository root)\n", file, FNR, inc
        bad++
      } else if (!mayInclude(from, to)) {
        printf "%s:%d: %s may not include %s (#include \"%s\")\n", file, FNR, from, to, inc
        bad++
      }
    }
    END {
      if (bad > 0) { printf "%d include(s) cross a layer; the rooms and what each may include: tools/check-includes.sh\n", bad; exit 1 }
      printf "includes: %d files, every include within its layer\n", checked
    }' $(cat)
