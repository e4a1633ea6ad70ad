// Draws a profile's live-memory timeline as a standalone SVG: live bytes over the events of
// one training step, with the forward, backward and optimizer phases shaded and the peak
// marked with its composition.
#ifndef MAPD_PLANNER_PROFILE_TIMELINE_SVG_H_
#define MAPD_PLANNER_PROFILE_TIMELINE_SVG_H_

#include <string>

#include "planner/profile/profiler.h"

namespace mapd {

std::string RenderTimelineSvg(const ProfileReport& report, const std::string& title);

}  // namespace mapd

#endif  // MAPD_PLANNER_PROFILE_TIMELINE_SVG_H_
