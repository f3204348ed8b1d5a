// SPDX-License-Identifier: Apache-2.0
//
// `egwd -i`: the egw> prompt on egwd's own terminal, while the data plane forwards.
//
// No thread of its own: poll() is called from the control loop, reads what stdin has (poll(2)
// with a zero timeout, then one read), feeds the line editor, and runs each finished line right
// there, on the control thread that owns the state. On a terminal the log lines egwd writes
// meanwhile are drawn above the prompt (the logger's sinks are wrapped for the console's
// lifetime). With stdin not a terminal, lines are read without prompt or echo, and the end of
// input only closes the console: egwd keeps running.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/cli/cli.h"
#include "control/cli/line_editor.h"

namespace spdlog::sinks {
class sink;
}

namespace egw::cli {

class Console {
public:
    explicit Console(Cli& cli);
    ~Console();
    Console(const Console&) = delete;
    Console& operator=(const Console&) = delete;

    // False once the console asked egwd to stop (`quit`, or Ctrl-D on a terminal).
    bool poll();

    // Around output that is not the console's (log lines): erase the prompt line, draw it again.
    void hide_prompt();
    void show_prompt();

private:
    bool run_line(const std::string& line);
    void out(std::string_view s);

    Cli& cli_;
    bool terminal_ = false;
    bool open_ = true;
    std::unique_ptr<RawTerminal> raw_;
    std::unique_ptr<LineEditor> editor_;
    std::string pending_;  // non-terminal input: an unfinished line
    std::mutex mu_;        // the terminal: editor state and writes (logs may come from other threads)
    std::vector<std::shared_ptr<spdlog::sinks::sink>> saved_sinks_;
};

}  // namespace egw::cli
