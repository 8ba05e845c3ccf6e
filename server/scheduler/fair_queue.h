// A device queue that serves higher priority first, with aging, and takes
// turns between principals within a priority (docs/architecture.md,
// "Priorities and fair share"):
//
//   effective(level) = priority + floor(wait of its oldest task / aging_ns)
//
// Pop serves the level with the highest effective priority (ties: the
// higher base priority), so a low-priority task waiting long enough
// outranks any later arrival and never starves. Within a level each
// principal has a FIFO, and the principals take turns (round robin in
// order of arrival): one principal's burst of a thousand tasks delays
// another's single task by at most one task per principal ahead of it.
// Not thread-safe: the device worker guards it with its own mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace kerneld::server {

template <typename T>
class FairQueue {
 public:
  explicit FairQueue(int64_t aging_ns = 10'000'000) : aging_ns_(aging_ns > 0 ? aging_ns : 1) {}

  void set_aging_ns(int64_t ns) { aging_ns_ = ns > 0 ? ns : 1; }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  void Push(T item, int priority, std::string_view principal, int64_t now_ns) {
    Level& level = LevelFor(priority);
    auto it = level.index.find(principal);
    if (it == level.index.end()) {
      level.turns.push_back(Lane{std::string(principal), {}});
      it = level.index.emplace(level.turns.back().principal, std::prev(level.turns.end())).first;
    }
    it->second->items.push_back({std::move(item), now_ns});
    ++size_;
  }

  // The next task; the queue must not be empty.
  T Pop(int64_t now_ns) {
    Level* pick = nullptr;
    if (levels_.size() == 1) {
      pick = &levels_.front();
    } else {
      int64_t pick_eff = 0;
      for (Level& l : levels_) {  // highest base priority first
        int64_t oldest = now_ns;
        for (const Lane& lane : l.turns) oldest = std::min(oldest, lane.items.front().enqueued_ns);
        const int64_t eff = l.priority + (now_ns - oldest) / aging_ns_;
        if (pick == nullptr || eff > pick_eff) pick = &l, pick_eff = eff;
      }
    }
    Lane& lane = pick->turns.front();
    T out = std::move(lane.items.front().item);
    lane.items.pop_front();
    --size_;
    if (lane.items.empty()) {
      pick->index.erase(lane.principal);
      pick->turns.pop_front();
      if (pick->turns.empty()) levels_.erase(levels_.begin() + (pick - levels_.data()));
    } else {
      pick->turns.splice(pick->turns.end(), pick->turns, pick->turns.begin());  // its turn is over
    }
    return out;
  }

  // Tasks of `principal` waiting at any priority.
  size_t CountOf(std::string_view principal) const {
    size_t n = 0;
    for (const Level& l : levels_)
      if (auto it = l.index.find(principal); it != l.index.end()) n += it->second->items.size();
    return n;
  }

 private:
  struct Item {
    T item;
    int64_t enqueued_ns;
  };
  struct Lane {
    std::string principal;
    std::deque<Item> items;
  };
  struct Level {
    int priority = 0;
    std::list<Lane> turns;  // principals with waiting tasks, whose turn is first
    absl::flat_hash_map<std::string_view, typename std::list<Lane>::iterator> index;
  };

  Level& LevelFor(int priority) {
    auto it = levels_.begin();
    while (it != levels_.end() && it->priority > priority) ++it;
    if (it == levels_.end() || it->priority != priority) {
      it = levels_.insert(it, Level{});
      it->priority = priority;
    }
    return *it;
  }

  int64_t aging_ns_;
  size_t size_ = 0;
  std::vector<Level> levels_;  // non-empty levels, highest priority first
};

}  // namespace kerneld::server
