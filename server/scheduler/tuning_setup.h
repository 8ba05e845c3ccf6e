// The daemon's side of the tuning table: options from the flags, the stamp
// of this build and host, and the --tuning_file loaded at start and written
// at exit.
#pragma once

#include "config.h"
#include "devices/device_manager.h"
#include "scheduler/tuning_file.h"
#include "scheduler/tuning_table.h"

namespace kerneld::server {

TuningOptions TuningOptionsFrom(const Config& cfg);
// kerneld's version and commit, the device models in order, driver, CUDA.
TuningStamp StampOf(const DeviceManager& devices);
// Loads cfg.tuning_file (if any) into the table, logging what happened; a
// malformed file is a start-up error (returned), a stale stamp a log line.
std::string LoadTuning(const Config& cfg, const DeviceManager& devices, TuningTable* table);
// Writes the table back to cfg.tuning_file with --tuning=online (frozen
// and off never change the decisions); logs a failure.
void SaveTuning(const Config& cfg, const DeviceManager& devices, const TuningTable& table);

}  // namespace kerneld::server
