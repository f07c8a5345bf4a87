// The peer of bench/tokenizer_vs_tiktoken.sh: js-tiktoken (npm, from the folder
// scripts/install-tokenizers.sh fills) encodes a whole file as ordinary text, once.
//   node js_tiktoken_encode.cjs TOKENIZER_DIR ENCODING FILE
// Prints "tokens N encode_s S load_s L": the encoding alone is timed (load_s is the
// building of its tables), as dseek data tokenize --stats does.
const fs = require("fs");
const path = require("path");
const [dir, encoding, file] = process.argv.slice(2);
const { getEncoding } = require(path.join(dir, "node_modules", "js-tiktoken"));
const t0 = process.hrtime.bigint();
const enc = getEncoding(encoding);
const t1 = process.hrtime.bigint();
const text = new TextDecoder("utf-8", { ignoreBOM: true }).decode(fs.readFileSync(file));
const t2 = process.hrtime.bigint();
const ids = enc.encode(text, [], []);
const t3 = process.hrtime.bigint();
console.log(`tokens ${ids.length} encode_s ${Number(t3 - t2) / 1e9} load_s ${Number(t1 - t0) / 1e9}`);
