// Implementation of precision_resume.hpp.
#include "runtime/train/state/precision_resume.hpp"

namespace dseek::train {

PrecisionResume precision_resume(const checkpoint::PrecisionState& written,
                                 config::Precision precision) {
  PrecisionResume resume;
  const std::string& was = written.precision;
  if (precision != config::Precision::fp8) {
    if (was == "fp8") {
      resume.outcome = "ignored";
      resume.note = "checkpoint: written with train.precision = \"fp8\", resumed as \"" +
                    config::name_string(precision) + "\": its loss scale and fp8 amax histories are not used";
    }
    return resume;
  }
  if (was == "fp8") {
    resume.restore = true;
    resume.outcome = "restored";
    return resume;
  }
  resume.outcome = "fresh";
  resume.note = "checkpoint: ";
  if (was.empty()) {
    resume.note += "no mixed-precision state recorded (an older checkpoint)";
  } else {
    resume.note += "written with train.precision = \"" + was + "\"";
  }
  resume.note += "; fp8 starts at train.loss_scale_init with empty amax histories";
  return resume;
}

}  // namespace dseek::train
