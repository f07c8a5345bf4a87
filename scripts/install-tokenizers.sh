#!/usr/bin/env bash
# Installs the rank files of the BPE tokenizers (r50k_base = GPT-2's, cl100k_base) where
# dseek looks for them: $DSEEK_TOKENIZER_DIR, else $XDG_CACHE_HOME/dseek/tokenizers, else
# ~/.cache/dseek/tokenizers. They come from npm's js-tiktoken package (pinned version),
# which ships them compressed inside its JavaScript; this writes them back as the
# standard .tiktoken files ("base64 rank" lines) and checks their SHA-256 against the
# hashes tiktoken pins for OpenAI's files (dseek checks them again on every load).
# js-tiktoken stays installed there too: it is the reference of the tests and benchmark.
# Idempotent. Usage: scripts/install-tokenizers.sh [DIR]
set -euo pipefail

version=1.0.21
dir=${1:-${DSEEK_TOKENIZER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dseek/tokenizers}}
declare -A sha256=(
  [r50k_base]=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
  [cl100k_base]=223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7
)

installed() {
  local name
  [ -f "$dir/node_modules/js-tiktoken/package.json" ] || return 1
  grep -q "\"version\": \"$version\"" "$dir/node_modules/js-tiktoken/package.json" || return 1
  for name in "${!sha256[@]}"; do
    [ -f "$dir/$name.tiktoken" ] || return 1
    echo "${sha256[$name]}  $dir/$name.tiktoken" | sha256sum --quiet -c - 2>/dev/null || return 1
  done
}

if installed; then
  echo "install-tokenizers.sh: r50k_base and cl100k_base are installed in $dir"
  exit 0
fi
command -v node >/dev/null || { echo "install-tokenizers.sh: node not found (scripts/install-deps.sh installs nodejs)" >&2; exit 1; }
command -v npm >/dev/null || { echo "install-tokenizers.sh: npm not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
mkdir -p "$dir"
echo "install-tokenizers.sh: npm install js-tiktoken@$version into $dir"
[ -f "$dir/package.json" ] || echo '{"private": true}' > "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "js-tiktoken@$version" >/dev/null

for name in "${!sha256[@]}"; do
  # The package's ranks: {"bpe_ranks": "! OFFSET TOKEN TOKEN ...\n...", ...}, each
  # TOKEN base64, ranks OFFSET, OFFSET + 1, ... along a line.
  DSEEK_RANKS_MODULE="$dir/node_modules/js-tiktoken/dist/ranks/$name.cjs" \
  DSEEK_RANKS_OUT="$dir/.$name.tiktoken.tmp" node -e '
    const fs = require("fs");
    const ranks = require(process.env.DSEEK_RANKS_MODULE);
    const tokens = [];
    for (const line of ranks.bpe_ranks.split("\n").filter(Boolean)) {
      const [, offset, ...parts] = line.split(" ");
      parts.forEach((token, i) => tokens.push([Number.parseInt(offset, 10) + i, token]));
    }
    tokens.sort((a, b) => a[0] - b[0]);
    fs.writeFileSync(process.env.DSEEK_RANKS_OUT, tokens.map(([r, t]) => `${t} ${r}\n`).join(""));'
  if ! echo "${sha256[$name]}  $dir/.$name.tiktoken.tmp" | sha256sum --quiet -c - ; then
    echo "install-tokenizers.sh: $name from js-tiktoken@$version does not have SHA-256 ${sha256[$name]}" >&2
    exit 1
  fi
  mv "$dir/.$name.tiktoken.tmp" "$dir/$name.tiktoken"
done
echo "install-tokenizers.sh: installed r50k_base.tiktoken and cl100k_base.tiktoken in $dir (SHA-256 checked)"
