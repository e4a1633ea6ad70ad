#include "common/clock.h"

#include <chrono>

namespace mapd {

namespace {
class WallClock : public Clock {
 public:
  double NowUnixSeconds() override {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
};
}  // namespace

Clock* SystemClock() {
  static WallClock clock;
  return &clock;
}

}  // namespace mapd
