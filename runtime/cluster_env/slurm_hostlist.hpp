// Slurm's host list syntax ("gpu[01-04,07],login1"), expanded into host names as
// Slurm writes them in SLURM_JOB_NODELIST and SLURM_STEP_NODELIST.
//
// The grammar follows Slurm 22.05's own parser (`scontrol show hostnames`): entries are
// separated by commas or blanks (empty entries are skipped); an entry is a prefix and
// any number of bracket groups, with literal text allowed between groups but not after
// the last one ("rack[1-2]-node[01-02]" is fine, "a[1-2]b" is refused, as Slurm refuses
// it); a group is a comma-separated list of numbers and ranges lo-hi (lo <= hi); a
// number or range is zero padded to the width of its first number as written
// ("n[08-010]" -> n08 n09 n10, "n[9-11]" -> n9 n10 n11). Several groups expand as their
// product, the first group varying slowest. Anything else is an error.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dseek::cluster_env {

struct HostlistError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// At most this many hosts: a longer expansion is an error, not an allocation.
inline constexpr size_t kMaxHosts = 65536;

// The hosts of `list` in order. Throws HostlistError saying what is wrong and where.
std::vector<std::string> expand_hostlist(std::string_view list);

}  // namespace dseek::cluster_env
