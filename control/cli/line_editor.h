// SPDX-License-Identifier: Apache-2.0
//
// A small line editor for the `egw>` prompt of `egwd -i` and `egwctl`.
//
// It is a state machine fed one byte at a time and writing through a callback, so the same code
// runs inside egwd's non-blocking control loop (bytes arrive whenever poll() says so, the loop
// never waits for a line) and in egwctl's blocking read loop, and the unit tests drive it with
// strings. Keys: printable characters insert; Backspace, Delete, Ctrl-D (delete, or end of input
// on an empty line); arrows, Home/End, Ctrl-A/E/B/F move; Ctrl-K/U/W kill to the end, to the
// start, the word before; Up/Down and Ctrl-P/N walk the history; Ctrl-L clears the screen; Ctrl-C
// drops the line; TAB completes. Every edit redraws the one line (prompt, text, erase to the end
// of line, cursor back), which is correct for any line shorter than the terminal.
#pragma once

#include <termios.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>

#include "control/cli/grammar.h"

namespace egw::cli {

class History {
public:
    explicit History(size_t max = 1000) : max_(max) {}
    // Keeps non-blank lines that differ from the previous one.
    void add(const std::string& line);
    size_t size() const { return lines_.size(); }
    const std::string& at(size_t i) const { return lines_[i]; }
    // One line per entry. load() appends; both return false when the file cannot be used.
    bool load(const std::string& path);
    bool save(const std::string& path) const;

private:
    size_t max_;
    std::deque<std::string> lines_;
};

class LineEditor {
public:
    using Writer = std::function<void(std::string_view)>;
    using Completer = std::function<Completion(const std::string& before_cursor)>;
    enum class Event : uint8_t { none, line, eof };

    LineEditor(std::string prompt, Writer write, Completer complete);

    // Starts a new line: writes the prompt.
    void begin();
    // Handles one input byte. Event::line: take_line() has the entered line (the editor then
    // shows nothing until begin()); Event::eof: Ctrl-D on an empty line.
    Event feed(char c);
    std::string take_line();

    // Around output that is not the editor's (log lines): hide() erases the prompt line,
    // show() draws it again. Both do nothing when no line is being edited.
    void hide();
    void show();

    void set_columns(unsigned columns) { columns_ = columns ? columns : 80; }
    History& history() { return history_; }
    const std::string& text() const { return buf_; }
    size_t cursor() const { return cursor_; }

private:
    enum class State : uint8_t { normal, esc, csi, ss3 };
    void redraw();
    void insert(std::string_view s);
    void erase(size_t from, size_t to);
    void complete();
    void list(const Completion& c);
    void recall(size_t pos);
    void key_csi(const std::string& params, char final);

    std::string prompt_;
    Writer write_;
    Completer complete_;
    History history_;
    std::string buf_;
    size_t cursor_ = 0;
    bool editing_ = false;
    State state_ = State::normal;
    std::string params_;
    bool after_cr_ = false;
    size_t hist_pos_ = 0;
    std::string saved_;  // the line being typed while the history is walked
    std::string line_;
    unsigned columns_ = 80;
};

// Raw input on a terminal for the editor's lifetime: no echo, no line buffering, Enter as CR.
// Output processing stays as it was; so do signal keys (Ctrl-C, Ctrl-Z) when `keep_signals`,
// otherwise Ctrl-C reaches the editor, which drops the line. Does nothing when `fd` is not a
// terminal.
class RawTerminal {
public:
    explicit RawTerminal(int fd, bool keep_signals = true);
    ~RawTerminal();
    RawTerminal(const RawTerminal&) = delete;
    RawTerminal& operator=(const RawTerminal&) = delete;
    bool active() const { return active_; }
    void restore();

private:
    int fd_;
    bool active_ = false;
    struct termios saved_ {};
};

// The terminal's width in columns, 80 when unknown.
unsigned terminal_columns(int fd);

}  // namespace egw::cli
