# The index of a prepared token data set (`dseek data prepare`), stored as index.capnp
# next to the shard files. It is written last and atomically: a directory without it is
# not a data set. Readers check every shard's size and checksum against it.
@0xa695e4050b917465;

$import "/capnp/c++.capnp".namespace("dseek::schema");

enum TokenDtype {
  # Reserve 0 so that a zeroed or truncated message never reads as a valid dtype.
  unknown @0;
  uint16Le @1;
  uint32Le @2;            # when the vocabulary does not fit 16 bits
}

struct ShardEntry {
  fileName @0 :Text;      # plain name inside the data set directory
  tokens @1 :UInt64;      # tokens stored in the shard
  bytes @2 :UInt64;       # file size: header plus tokens
  xxhash64 @3 :UInt64;    # XXH64 (seed 0) of the whole file, header included
}

struct SplitIndex {
  documents @0 :UInt64;   # documents (text files, JSON lines) in this split
  tokens @1 :UInt64;      # sum of the shards' tokens, separators included
  shards @2 :List(ShardEntry);  # in order: the split is their concatenation
}

struct ShardIndex {
  formatVersion @0 :UInt32;
  tokenizer @1 :Text;     # "bytes" (one token per byte value; also when empty, as in
                          # format 1), "r50k_base" (GPT-2's) or "cl100k_base"
  vocabSize @2 :UInt32;
  tokenDtype @3 :TokenDtype;
  separatorToken @4 :UInt32;  # inserted between documents
  sourceDir @5 :Text;     # the input directory, as an absolute path
  inputBytes @6 :UInt64;  # bytes of the documents taken
  skippedFiles @7 :UInt64;  # binary, unreadable or empty files not taken
  valFraction @8 :Float64;  # format 1: of documents by hash; format 2: of tokens
  train @9 :SplitIndex;
  validation @10 :SplitIndex;
  # Format 2 on.
  tokenizerSha256 @11 :Text;  # of the tokenizer's rank file, lowercase hex ("" for bytes)
  skippedRecords @12 :UInt64; # malformed JSON lines, lines without the text field,
                              # truncated compressed files: named in the log, not taken
}
