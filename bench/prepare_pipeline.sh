#!/usr/bin/env bash
# Whole-pipeline speed of `dseek data prepare` (every stage on: decode with NFC, clean
# with the filters, exact and MinHash dedup, tokenize, augment with FIM at 0.5, write)
# on 1 and 2 workers, side by side in one run, and the scaling from 1 to 2. For
# reference, the tokenizer alone on one core (`dseek data tokenize --stats`) on the same
# text. Runs alternate 1, 2 workers (then 2, 1) so a load swing hits both; the table
# shows each one's median MB/s (decoded text bytes / wall time of the whole run, from
# the report) and the median of the per-pair ratios 2 / 1 workers with their range.
#
#   bench/prepare_pipeline.sh [--runs 5] [--tokenizer gpt2] [--input /usr/lib/python3.11]
#
# Prints markdown for bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=5 tokenizer=gpt2 input=/usr/lib/python3.11
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --tokenizer) tokenizer=$2; shift 2 ;;
    --input) input=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
dseek=${DSEEK_BIN:-build/bin/dseek}
[ -x "$dseek" ] || { echo "no $dseek: build first (scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { python3 -c 'import sys, statistics; print(statistics.median(map(float, sys.argv[1:])))' "$@"; }
json() { python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, r))' "$@"; }

run() {  # workers -> "MB/s"
  rm -rf "$work/out"
  "$dseek" data prepare --input "$input" --output "$work/out" --tokenizer "$tokenizer" \
    --workers "$1" --fim-rate 0.5 --no-progress > "$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
  json "$work/out/report.json" 'read_bytes / seconds / 1e6'
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc), $(date -u +%Y-%m-%d)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
run 1 > /dev/null  # warm the page cache
echo "corpus: $input ($(json "$work/out/report.json" 'read_bytes') bytes of text in $(json "$work/out/report.json" 'documents_in') documents), tokenizer $tokenizer; kept $(json "$work/out/report.json" 'documents'), dropped $(json "$work/out/report.json" 'dropped')"
find "$input" -name '*.py' -type f | sort | xargs cat > "$work/text"
tok=$("$dseek" data tokenize --tokenizer "$tokenizer" --stats < "$work/text" 2>&1 >/dev/null | sed -n 's/.*, \([0-9.]*\) MB\/s.*/\1/p')
one=() two=() ratio=()
for ((r = 0; r < runs; ++r)); do
  if ((r % 2 == 0)); then a=$(run 1); b=$(run 2); else b=$(run 2); a=$(run 1); fi
  one+=("$a") two+=("$b")
  ratio+=("$(python3 -c "print($b / $a)")")
done
range=$(python3 -c 'import sys; v = list(map(float, sys.argv[1:])); print(f"{min(v):.2f}-{max(v):.2f}")' "${ratio[@]}")
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| pipeline (every stage) | 1 worker MB/s | 2 workers MB/s | 2 / 1 (median of $runs pairs, range) | tokenizer alone, 1 core, MB/s |"
echo "|---|--:|--:|--:|--:|"
printf '| %s on %s | %.1f | %.1f | %.2f (%s) | %s |\n' "$tokenizer" "$input" "$(median "${one[@]}")" \
  "$(median "${two[@]}")" "$(median "${ratio[@]}")" "$range" "$tok"
