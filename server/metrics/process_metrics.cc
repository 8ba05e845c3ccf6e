#include "metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "metrics/one_family.h"

namespace kerneld::server {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// The fields of /proc/self/stat after "(comm)", which may itself hold spaces
// and parentheses: fields[0] is the state (field 3 of proc(5)).
std::vector<std::string> StatFields() {
  std::ifstream f("/proc/self/stat");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = all.rfind(')');
  std::vector<std::string> out;
  if (close == std::string::npos) return out;
  std::istringstream in(all.substr(close + 1));
  for (std::string s; in >> s;) out.push_back(s);
  return out;
}

// Seconds since the epoch at boot (/proc/stat "btime").
double BootTime() {
  std::ifstream f("/proc/stat");
  for (std::string key; f >> key;) {
    if (key == "btime") {
      double t = 0;
      f >> t;
      return t;
    }
    f.ignore(1 << 20, '\n');
  }
  return 0;
}

int OpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the descriptor opendir itself holds
}

}  // namespace

std::vector<MetricFamily> ProcessFamilies() {
  std::vector<MetricFamily> out;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // proc(5) numbering: utime 14, stime 15, starttime 22, vsize 23, rss 24;
  // fields[0] is field 3.
  if (const auto s = StatFields(); s.size() > 21 && ticks > 0) {
    const double cpu = (std::stod(s[11]) + std::stod(s[12])) / ticks;
    out.push_back(OneValueFamily("process_cpu_seconds_total",
                                 "Total user and system CPU time spent in seconds.",
                                 MetricType::Counter, cpu));
    out.push_back(OneValueFamily("process_resident_memory_bytes", "Resident memory size in bytes.",
                                 MetricType::Gauge, std::stod(s[21]) * page));
    out.push_back(OneValueFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                                 MetricType::Gauge, std::stod(s[20])));
    if (const double boot = BootTime(); boot > 0)
      out.push_back(OneValueFamily("process_start_time_seconds",
                                   "Start time of the process since unix epoch in seconds.",
                                   MetricType::Gauge, boot + std::stod(s[19]) / ticks));
  }
  if (const int fds = OpenFds(); fds >= 0)
    out.push_back(OneValueFamily("process_open_fds", "Number of open file descriptors.",
                                 MetricType::Gauge, fds));
  if (rlimit r{}; getrlimit(RLIMIT_NOFILE, &r) == 0)
    out.push_back(OneValueFamily("process_max_fds", "Maximum number of open file descriptors.",
                                 MetricType::Gauge, static_cast<double>(r.rlim_cur)));
  return out;
}

}  // namespace kerneld::server
