// The tuning table on disk (--tuning_file; `kernelctl tune` writes the same
// format): a stamp line, then one row per (op, impl, dtypes, bucket, device
// model). Measurements hold only for the build, GPUs, driver and CUDA that
// took them, so a file whose stamp differs is ignored (with a log line).
//
//   kerneld-tuning 1
//   stamp <TAB> version <TAB> devices <TAB> driver <TAB> cuda
//   row <TAB> op <TAB> impl <TAB> dtypes <TAB> bucket <TAB> model <TAB> runs <TAB> ewma_ns <TAB>
//   samples,...
#pragma once

#include <string>

#include "kerneld/status.h"
#include "scheduler/tuning_table.h"

namespace kerneld::server {

struct TuningStamp {
  std::string version;  // kerneld's version and commit
  std::string devices;  // the device models, "|"-joined in device order
  int driver = 0;       // cudaDriverGetVersion (0: none)
  int cuda = 0;         // cudaRuntimeGetVersion (0: not built with CUDA)
  bool operator==(const TuningStamp&) const = default;
  std::string ToString() const;
};

// Writes every row of the table (atomically: a temporary file, then rename).
Status SaveTuningFile(const TuningTable& table, const TuningStamp& stamp, const std::string& path);

// Loads `path` into the table. A missing file is not an error (a first
// start); a stamp that differs leaves the table empty and says so in
// *note; rows naming an op, impl or bucket this build lacks are skipped
// (counted in *note). A malformed file is INVALID_ARGUMENT.
Status LoadTuningFile(const std::string& path, const TuningStamp& stamp, TuningTable* table,
                      std::string* note);

}  // namespace kerneld::server
