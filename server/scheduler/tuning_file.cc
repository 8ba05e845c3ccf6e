#include "scheduler/tuning_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kerneld::server {

namespace {
constexpr char kMagic[] = "kerneld-tuning 1";

// Fields are tab-separated: a tab or newline inside one (a device name)
// would break the line, so they become spaces.
std::string Field(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}
}  // namespace

std::string TuningStamp::ToString() const {
  return "version " + version + ", devices " + devices + ", driver " + std::to_string(driver) +
         ", cuda " + std::to_string(cuda);
}

Status SaveTuningFile(const TuningTable& table, const TuningStamp& stamp, const std::string& path) {
  std::ostringstream out;
  out << kMagic << "\n"
      << "stamp\t" << Field(stamp.version) << "\t" << Field(stamp.devices) << "\t" << stamp.driver
      << "\t" << stamp.cuda << "\n";
  for (const TuningRow& r : table.Rows()) {
    if (r.samples.empty()) continue;  // timed only for placement (frozen, off)
    out << "row\t" << Field(r.op) << "\t" << Field(r.impl) << "\t" << r.dtypes << "\t" << r.bucket
        << "\t" << Field(r.model) << "\t" << r.runs << "\t" << r.ewma_ns << "\t"
        << absl::StrJoin(r.samples, ",") << "\n";
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return Internal("tuning file: cannot write " + Quote(tmp));
    f << out.str();
    f.flush();
    if (!f) return Internal("tuning file: writing " + Quote(tmp) + " failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Internal("tuning file: cannot rename " + Quote(tmp) + " to " + Quote(path));
  return Status::Ok();
}

Status LoadTuningFile(const std::string& path, const TuningStamp& stamp, TuningTable* table,
                      std::string* note) {
  note->clear();
  std::ifstream f(path);
  if (!f) {
    *note = "tuning file " + path + " not found; starting with an empty table";
    return Status::Ok();
  }
  std::string line;
  if (!std::getline(f, line) || line != kMagic)
    return InvalidArgument("tuning file " + Quote(path) + ": first line is not \"" + kMagic + "\"");
  if (!std::getline(f, line)) return InvalidArgument("tuning file " + Quote(path) + ": no stamp");
  const std::vector<std::string> s = absl::StrSplit(line, '\t');
  TuningStamp got;
  if (s.size() != 5 || s[0] != "stamp" || !absl::SimpleAtoi(s[3], &got.driver) ||
      !absl::SimpleAtoi(s[4], &got.cuda))
    return InvalidArgument("tuning file " + Quote(path) + ": malformed stamp line");
  got.version = s[1];
  got.devices = s[2];
  if (!(got == stamp)) {
    *note = "tuning file " + path + " ignored: it was measured with " + got.ToString() +
            "; this is " + stamp.ToString();
    return Status::Ok();
  }
  int loaded = 0, skipped = 0, lineno = 2;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.empty()) continue;
    const std::vector<std::string> v = absl::StrSplit(line, '\t');
    TuningRow r;
    if (v.size() != 9 || v[0] != "row" || !absl::SimpleAtoi(v[6], &r.runs) ||
        !absl::SimpleAtoi(v[7], &r.ewma_ns))
      return InvalidArgument("tuning file " + Quote(path) + " line " + std::to_string(lineno) +
                             ": malformed row");
    r.op = v[1], r.impl = v[2], r.dtypes = v[3], r.bucket = v[4], r.model = v[5];
    for (absl::string_view t : absl::StrSplit(v[8], ',', absl::SkipEmpty())) {
      int64_t x = 0;
      if (!absl::SimpleAtoi(t, &x) || x < 0)
        return InvalidArgument("tuning file " + Quote(path) + " line " + std::to_string(lineno) +
                               ": bad sample " + Quote(std::string(t)));
      r.samples.push_back(x);
    }
    if (table->Insert(r))
      ++loaded;
    else
      ++skipped;
  }
  *note = "tuning file " + path + ": " + std::to_string(loaded) + " rows loaded";
  if (skipped) *note += ", " + std::to_string(skipped) + " skipped (unknown op, impl or bucket)";
  return Status::Ok();
}

}  // namespace kerneld::server
