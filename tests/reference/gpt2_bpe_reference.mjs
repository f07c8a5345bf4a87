// GPT-2's tokenizer from a Hugging Face folder's vocab.json and merges.txt, written
// from the published format and OpenAI's encoder.py (bytes_to_unicode, the pre-tokenizer
// regex, BPE by merge rank), independent of dseek's code: prints the ids of a text file,
// space-separated, on one line.
// Usage: node gpt2_bpe_reference.mjs FOLDER TEXT_FILE
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const [folder, textFile] = process.argv.slice(2);
const encoder = JSON.parse(readFileSync(join(folder, 'vocab.json'), 'utf8'));
const mergeLines = readFileSync(join(folder, 'merges.txt'), 'utf8').split('\n');
if (!mergeLines[0].startsWith('#version')) throw new Error('merges.txt: no #version line');
const ranks = new Map();
mergeLines.slice(1).filter((l) => l.length > 0).forEach((line, i) => {
  const parts = line.split(' ');
  if (parts.length !== 2) throw new Error(`merges.txt line ${i + 2}: not two tokens`);
  ranks.set(parts[0] + '\u0000' + parts[1], i);
});

// encoder.py's bytes_to_unicode.
const printable = [];
for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
for (let b = 0xae; b <= 0xff; b++) printable.push(b);
const byteChar = new Array(256);
let next = 256;
for (let b = 0; b < 256; b++) byteChar[b] = String.fromCodePoint(printable.includes(b) ? b : next++);

function bpe(token) {
  let word = Array.from(token);
  while (word.length > 1) {
    let best = -1, bestRank = Infinity;
    for (let i = 0; i + 1 < word.length; i++) {
      const r = ranks.get(word[i] + '\u0000' + word[i + 1]);
      if (r !== undefined && r < bestRank) { bestRank = r; best = i; }
    }
    if (best < 0) break;
    const [first, second] = [word[best], word[best + 1]];
    const merged = [];
    for (let i = 0; i < word.length;) {  // every occurrence, left to right
      if (i + 1 < word.length && word[i] === first && word[i + 1] === second) {
        merged.push(first + second); i += 2;
      } else { merged.push(word[i]); i += 1; }
    }
    word = merged;
  }
  return word;
}

const pattern = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const text = readFileSync(textFile, 'utf8');
const ids = [];
for (const match of text.matchAll(pattern)) {
  const chars = Array.from(Buffer.from(match[0], 'utf8'), (b) => byteChar[b]).join('');
  for (const piece of bpe(chars)) {
    const id = encoder[piece];
    if (id === undefined) throw new Error(`vocab.json has no token ${JSON.stringify(piece)}`);
    ids.push(id);
  }
}
process.stdout.write(ids.join(' ') + '\n');
