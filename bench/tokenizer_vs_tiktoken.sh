#!/usr/bin/env bash
# BPE encoding speed on one core: dseek's tokenizers (`dseek data tokenize --stats`)
# against js-tiktoken (bench/peers/js_tiktoken_encode.cjs under Node.js), r50k_base
# (GPT-2) and cl100k_base, on the same corpora, each encoded whole as one text.
#
#   bench/tokenizer_vs_tiktoken.sh [--runs 5] [--encodings "r50k_base cl100k_base"]
#
# Corpora: "python" (every .py file directly under /usr/lib/python3.11, ~4.7 MB of code)
# and "prose" (/usr/share/common-licenses/*, license texts in English). Both sides are
# pinned to the same core (taskset -c 0) and time the encoding alone, not the loading
# of their tables (printed apart). Runs alternate dseek, js-tiktoken (AB, then BA) so a
# load swing hits both; the table shows each side's median tokens/s and the median of
# the per-pair ratios dseek / js-tiktoken with their range. The ids are compared once
# per corpus and encoding (the token counts of both sides must agree; the full id
# comparison is tests/integration/test_tokenizer_reference.cpp). Prints markdown for
# bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=5 encodings="r50k_base cl100k_base"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --encodings) encodings=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
dseek=${DSEEK_BIN:-build/bin/dseek}
tokdir=${DSEEK_TOKENIZER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dseek/tokenizers}
[ -x "$dseek" ] || { echo "no $dseek: build first (scripts/build.sh)" >&2; exit 1; }
[ -d "$tokdir/node_modules/js-tiktoken" ] || { echo "no js-tiktoken in $tokdir: run scripts/install-tokenizers.sh" >&2; exit 1; }
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat /usr/lib/python3.11/*.py > "$work/python"
cat /usr/share/common-licenses/* > "$work/prose"

median() { python3 -c 'import sys, statistics; print(statistics.median(map(float, sys.argv[1:])))' "$@"; }
field() { sed -n "s/.*$1 \([0-9.e+-]*\).*/\1/p"; }  # "... NAME value ..." -> value

run_dseek() {  # encoding corpus -> "tokens seconds"
  local out
  out=$("${pin[@]}" "$dseek" data tokenize --tokenizer "$1" --stats < "$work/$2" 2>&1 >/dev/null)
  echo "$(echo "$out" | sed -n 's/.* -> \([0-9]*\) tokens in \([0-9.]*\) s.*/\1 \2/p')"
}
run_js() {
  local out
  out=$("${pin[@]}" node bench/peers/js_tiktoken_encode.cjs "$tokdir" "$1" "$work/$2")
  echo "$(echo "$out" | field tokens) $(echo "$out" | field encode_s)"
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc), $(date -u +%Y-%m-%d)"
echo "cpu flags: $(grep -o -w -E 'avx2|avx512f|avx512bw|amx_tile|sha_ni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "node $(node --version), js-tiktoken $(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$tokdir/node_modules/js-tiktoken/package.json"), pinned: ${pin[*]:-no (taskset missing)}"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| encoding | corpus | MB | tokens | dseek tok/s | js-tiktoken tok/s | dseek / js-tiktoken (median of $runs pairs, range) |"
echo "|---|---|--:|--:|--:|--:|--:|"
for encoding in $encodings; do
  for corpus in python prose; do
    ours=() theirs=() ratios=()
    tokens_ours="" tokens_theirs=""
    for ((r = 0; r < runs; r++)); do
      if ((r % 2 == 0)); then a=$(run_dseek "$encoding" "$corpus"); b=$(run_js "$encoding" "$corpus")
      else b=$(run_js "$encoding" "$corpus"); a=$(run_dseek "$encoding" "$corpus"); fi
      read -r tokens_ours s_ours <<< "$a"
      read -r tokens_theirs s_theirs <<< "$b"
      if [ "$tokens_ours" != "$tokens_theirs" ]; then
        echo "token counts differ on $corpus with $encoding: dseek $tokens_ours, js-tiktoken $tokens_theirs" >&2
        exit 1
      fi
      ours+=("$(python3 -c "print($tokens_ours / $s_ours)")")
      theirs+=("$(python3 -c "print($tokens_theirs / $s_theirs)")")
      ratios+=("$(python3 -c "print($s_theirs / $s_ours)")")
    done
    range=$(python3 -c 'import sys; v = list(map(float, sys.argv[1:])); print(f"{min(v):.1f}-{max(v):.1f}")' "${ratios[@]}")
    mb=$(python3 -c "import os; print(f'{os.path.getsize(\"$work/$corpus\") / 1e6:.2f}')")
    printf "| %s | %s | %s | %s | %.0f | %.0f | **%.1fx** (%s) |\n" "$encoding" "$corpus" "$mb" \
      "$tokens_ours" "$(median "${ours[@]}")" "$(median "${theirs[@]}")" "$(median "${ratios[@]}")" "$range"
  done
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
