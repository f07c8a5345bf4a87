// Runs an ONNX model in ONNX Runtime (npm's onnxruntime-node, installed by
// scripts/install-onnxruntime.sh) on token ids and writes its logits: the reference
// runtime of tests/unit/test_onnx_export.cpp.
//   node onnx_logits.cjs MODEL IDS_FILE BATCH SEQUENCE OUT_FILE
// IDS_FILE holds BATCH*SEQUENCE little-endian int32 ids; OUT_FILE gets the float32
// logits [BATCH, SEQUENCE, vocab]. Prints the output's dims. Exit 3: no onnxruntime-node.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const dir = process.env.DSEEK_ONNXRUNTIME_DIR ||
    path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'dseek', 'onnxruntime');
let ort;
try {
  ort = require(path.join(dir, 'node_modules', 'onnxruntime-node'));
} catch (error) {
  console.error(`onnxruntime-node is not installed in ${dir}: run scripts/install-onnxruntime.sh (${error.message})`);
  process.exit(3);
}

async function main() {
  const [model, idsFile, batch, sequence, out] = process.argv.slice(2);
  const bytes = fs.readFileSync(idsFile);
  const ids = new BigInt64Array(bytes.length / 4);
  for (let i = 0; i < ids.length; ++i) ids[i] = BigInt(bytes.readInt32LE(4 * i));
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 1});
  const input = new ort.Tensor('int64', ids, [Number(batch), Number(sequence)]);
  const result = await session.run({input_ids: input});
  const logits = result.logits;
  fs.writeFileSync(out, Buffer.from(logits.data.buffer, logits.data.byteOffset, logits.data.byteLength));
  console.log(`logits dims ${logits.dims.join(' ')} type ${logits.type}`);
}

main().catch((error) => {
  console.error(`onnxruntime: ${error.message}`);
  process.exit(1);
});
