// Time as the coordinator sees it, behind a seam so tests can set it.
#ifndef MAPD_COMMON_CLOCK_H_
#define MAPD_COMMON_CLOCK_H_

namespace mapd {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double NowUnixSeconds() = 0;
};

// The system's wall clock.
Clock* SystemClock();

// A clock tests move by hand.
class FakeClock : public Clock {
 public:
  explicit FakeClock(double start = 1.7e9) : now_(start) {}
  double NowUnixSeconds() override { return now_; }
  void Advance(double seconds) { now_ += seconds; }

 private:
  double now_;
};

}  // namespace mapd

#endif  // MAPD_COMMON_CLOCK_H_
