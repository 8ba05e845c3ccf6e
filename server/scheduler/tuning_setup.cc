#include "scheduler/tuning_setup.h"

#include "build_info.h"
#include "metrics/daemon_log.h"
#include "scheduler/scheduler.h"

namespace kerneld::server {

TuningOptions TuningOptionsFrom(const Config& cfg) {
  TuningOptions o;
  ParseTuningMode(cfg.tuning, &o.mode);  // ParseFlags checked it
  o.explore_runs = cfg.tuning_explore_runs;
  o.recheck_every = cfg.tuning_recheck_every;
  o.max_buckets = cfg.tuning_max_buckets;
  return o;
}

TuningStamp StampOf(const DeviceManager& devices) {
  TuningStamp s;
  s.version = std::string(kKerneldVersion) + "+" + kKerneldGitRevision;
  for (const auto& w : devices.workers()) {
    if (!s.devices.empty()) s.devices += "|";
    s.devices += Scheduler::ModelOf(w->info());
  }
  s.driver = devices.cuda().driver;
  s.cuda = devices.cuda().runtime;
  return s;
}

std::string LoadTuning(const Config& cfg, const DeviceManager& devices, TuningTable* table) {
  if (cfg.tuning_file.empty() || cfg.tuning == "off") return "";
  std::string note;
  if (Status st = LoadTuningFile(cfg.tuning_file, StampOf(devices), table, &note); !st.ok())
    return "--tuning_file: " + st.message();
  DaemonLog(LogLevel::kInfo, "tuning_file", note,
            {{"path", cfg.tuning_file}, {"mode", cfg.tuning}});
  return "";
}

void SaveTuning(const Config& cfg, const DeviceManager& devices, const TuningTable& table) {
  if (cfg.tuning_file.empty() || cfg.tuning != "online") return;
  if (Status st = SaveTuningFile(table, StampOf(devices), cfg.tuning_file); !st.ok())
    DaemonLog(LogLevel::kWarning, "tuning_file", st.message(), {{"path", cfg.tuning_file}});
}

}  // namespace kerneld::server
