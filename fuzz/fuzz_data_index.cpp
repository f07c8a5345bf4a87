// libFuzzer target: the data set index reader (data::read_dataset_index) on arbitrary
// bytes as a prepared data set's index: its Cap'n Proto parse and the checks of every
// split and shard entry. A DataError is the expected answer to bad input.
#include <cstdint>

#include "fuzz/fuzz_files.hpp"
#include "runtime/data/dataset_index.hpp"
#include "runtime/data/token_dataset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& dir = dseek::fuzz::scratch_dir();
  dseek::fuzz::write_input(dir / dseek::data::kIndexFileName, data, size);
  try {
    (void)dseek::data::read_dataset_index(dir);
  } catch (const dseek::data::DataError&) {
  }
  return 0;
}
