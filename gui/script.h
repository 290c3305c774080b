// `tpusim-gui --script FILE`: drives the window headless from a file of input steps, one per
// line, so tests exercise hovering, zooming and clicking, not only a still frame:
//
//   move X Y          the mouse to window pixel (X, Y)
//   click X Y         move there, press and release the left button
//   drag X0 Y0 X1 Y1  press at (X0, Y0), move to (X1, Y1) over a few frames, release
//   wheel N           turn the wheel N notches (positive: zoom in)
//   key K             press and release a key: a letter or digit
//   type TEXT         type TEXT (no spaces) into the focused field, then press Enter
//   wait N            draw N frames
//   screenshot PATH   write the next frame as PNG
//
// `#` starts a comment. Each step first waits for the simulations it set off to finish, then
// draws its frames. A malformed line is an error naming FILE:LINE before any window opens.
#pragma once
#include <imgui.h>

#include <string>
#include <vector>

namespace tpusim::gui {

struct ScriptStep {
  enum class Kind { move, click, drag, wheel, key, type, wait, screenshot } kind = Kind::wait;
  std::vector<float> numbers;
  std::string text;  // the key, the text typed, or the screenshot's path
  int line = 0;
};

std::vector<ScriptStep> load_script(const std::string& file);

// Plays the steps frame by frame. Before each frame: set the input of this frame in `io` (after
// the platform backend wrote its own). After it is drawn: `shot()` names the PNG to write now.
class ScriptPlayer {
 public:
  explicit ScriptPlayer(std::vector<ScriptStep> steps) : steps_(std::move(steps)) {}
  bool done() const { return step_ >= steps_.size(); }
  void before_frame(ImGuiIO& io);
  std::string shot() const { return shot_; }
  void after_frame();

 private:
  std::vector<ScriptStep> steps_;
  size_t step_ = 0;
  int frame_ = 0;  // within the current step
  ImVec2 mouse_{-FLT_MAX, -FLT_MAX};
  std::string shot_;
};

}  // namespace tpusim::gui
