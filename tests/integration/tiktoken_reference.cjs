// The reference side of tests/integration/test_tokenizer_reference.cpp and
// bench/tokenizer_vs_tiktoken.sh: js-tiktoken (installed by scripts/install-tokenizers.sh)
// encodes documents as ordinary text, after the WHATWG UTF-8 decoding of their bytes
// (invalid sequences become U+FFFD; a leading byte order mark is kept).
//   node tiktoken_reference.cjs TOKENIZER_DIR ENCODING DOCS OUT
// DOCS: documents, each a uint32 little-endian byte count then the bytes.
// OUT: for each document a uint32 token count then the uint32 ids (little-endian).
// Prints "unicode <version> encode_seconds <s> tokens <n>" on stdout.
const fs = require("fs");
const path = require("path");
const [dir, encoding, docsPath, outPath] = process.argv.slice(2);
const { getEncoding } = require(path.join(dir, "node_modules", "js-tiktoken"));
const enc = getEncoding(encoding);
const docs = fs.readFileSync(docsPath);
// ignoreBOM: keep a leading U+FEFF in the text (as Python reading UTF-8 does), not drop it.
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
const texts = [];
for (let pos = 0; pos < docs.length;) {
  const size = docs.readUInt32LE(pos);
  texts.push(decoder.decode(docs.subarray(pos + 4, pos + 4 + size)));
  pos += 4 + size;
}
const chunks = [];
let tokens = 0;
const start = process.hrtime.bigint();
const all = texts.map((text) => enc.encode(text, [], []));
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
for (const ids of all) {
  const out = Buffer.alloc(4 + 4 * ids.length);
  out.writeUInt32LE(ids.length, 0);
  ids.forEach((id, i) => out.writeUInt32LE(id, 4 + 4 * i));
  chunks.push(out);
  tokens += ids.length;
}
fs.writeFileSync(outPath, Buffer.concat(chunks));
console.log(`unicode ${process.versions.unicode} encode_seconds ${seconds} tokens ${tokens}`);
