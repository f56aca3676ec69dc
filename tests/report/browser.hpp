// Loading a page in Debian's chromium, headless, from tests: the DOM after the page ran, a
// screenshot, and every console message or uncaught exception the page caused. One launch per
// load; chromium runs as its own process (so under ASan too) with a temporary profile and a timeout.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "support/command.hpp"

namespace fraglab::testing {

inline constexpr const char* kChromium = "/usr/bin/chromium";

inline bool have_chromium() { return fs::exists(kChromium); }

struct BrowserLoad {
  int status = -1;                   // chromium's exit status
  std::string dom;                   // document.documentElement.outerHTML after load
  std::vector<std::string> console;  // stderr lines holding a console message or "Uncaught"
  fs::path screenshot;               // the PNG (1200x900)
};

// The console lines of chromium's stderr (--enable-logging=stderr prints each console message
// as "...:CONSOLE:...] "text", source: ..." and uncaught exceptions as "Uncaught ...").
inline std::vector<std::string> console_lines(const std::string& log) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(start, end - start);
    if (line.find(":CONSOLE") != std::string::npos || line.find("Uncaught") != std::string::npos) {
      lines.push_back(line);
    }
    start = end + 1;
  }
  return lines;
}

// Loads `page` (a local file) once: DOM and screenshot from the same launch.
inline BrowserLoad load_in_chromium(const fs::path& page, const fs::path& work) {
  fs::create_directories(work);
  BrowserLoad load;
  load.screenshot = work / "screenshot.png";
  const fs::path dom = work / "dom.html", log = work / "chromium.log", profile = work / "profile";
  const std::string command = "timeout 120 " + std::string(kChromium) +
                              " --headless=new --no-sandbox --disable-gpu --disable-extensions --no-first-run"
                              " --disable-background-networking --user-data-dir=" +
                              profile.string() + " --enable-logging=stderr --v=0 --window-size=1200,900 --screenshot=" +
                              load.screenshot.string() + " --dump-dom file://" + fs::absolute(page).string() + " >" +
                              dom.string() + " 2>" + log.string();
  const int raw = std::system(command.c_str());
  load.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  load.dom = read_text(dom);
  load.console = console_lines(read_text(log));
  return load;
}

}  // namespace fraglab::testing
