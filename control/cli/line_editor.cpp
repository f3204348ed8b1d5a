// SPDX-License-Identifier: Apache-2.0
#include "control/cli/line_editor.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

namespace egw::cli {

namespace {

constexpr char ctrl(char c) {
    return static_cast<char>(c & 0x1f);
}
constexpr char kDel = 0x7f;
constexpr char kEsc = 0x1b;

}  // namespace

void History::add(const std::string& line) {
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    if (!lines_.empty() && lines_.back() == line) return;
    lines_.push_back(line);
    while (lines_.size() > max_)
        lines_.pop_front();
}

bool History::load(const std::string& path) {
    std::ifstream f(path);
    if (!f) return false;
    std::string line;
    while (std::getline(f, line))
        add(line);
    return true;
}

bool History::save(const std::string& path) const {
    std::ofstream f(path, std::ios::trunc);
    for (const auto& l : lines_)
        f << l << '\n';
    return static_cast<bool>(f);
}

LineEditor::LineEditor(std::string prompt, Writer write, Completer complete)
    : prompt_(std::move(prompt)), write_(std::move(write)), complete_(std::move(complete)) {}

void LineEditor::begin() {
    buf_.clear();
    cursor_ = 0;
    hist_pos_ = history_.size();
    saved_.clear();
    editing_ = true;
    write_(prompt_);
}

std::string LineEditor::take_line() {
    return std::move(line_);
}

void LineEditor::hide() {
    if (editing_) write_("\r\x1b[K");
}

void LineEditor::show() {
    if (editing_) redraw();
}

void LineEditor::redraw() {
    std::string out = "\r" + prompt_ + buf_ + "\x1b[K";
    if (cursor_ < buf_.size()) out += "\x1b[" + std::to_string(buf_.size() - cursor_) + "D";
    write_(out);
}

void LineEditor::insert(std::string_view s) {
    buf_.insert(cursor_, s);
    cursor_ += s.size();
    if (cursor_ == buf_.size())
        write_(s);  // typing at the end: an echo is enough
    else
        redraw();
}

void LineEditor::erase(size_t from, size_t to) {
    if (from >= to) return;
    buf_.erase(from, to - from);
    cursor_ = from;
    redraw();
}

void LineEditor::recall(size_t pos) {
    if (hist_pos_ == history_.size()) saved_ = buf_;
    hist_pos_ = pos;
    buf_ = pos == history_.size() ? saved_ : history_.at(pos);
    cursor_ = buf_.size();
    redraw();
}

void LineEditor::list(const Completion& c) {
    std::string out = "\r\n";
    if (!c.candidates.empty()) {
        size_t width = 0;
        for (const auto& w : c.candidates)
            width = std::max(width, w.size());
        width += 2;
        size_t per_line = std::max<size_t>(1, columns_ / width);
        for (size_t i = 0; i < c.candidates.size(); ++i) {
            bool last_in_line = (i + 1) % per_line == 0 || i + 1 == c.candidates.size();
            out += c.candidates[i];
            out += last_in_line ? "\r\n" : std::string(width - c.candidates[i].size(), ' ');
        }
    }
    for (const auto& h : c.hints)
        out += "  <" + h + ">\r\n";
    write_(out);
    redraw();
}

void LineEditor::complete() {
    if (!complete_) return;
    Completion c = complete_(buf_.substr(0, cursor_));
    const std::string& partial = c.partial;
    size_t start = cursor_ - std::min(partial.size(), cursor_);
    auto replace = [&](const std::string& word, bool finished) {
        std::string w = word + (finished ? " " : "");
        buf_.replace(start, cursor_ - start, w);
        cursor_ = start + w.size();
        redraw();
    };
    if (c.candidates.size() == 1 && c.hints.empty()) {
        replace(c.candidates[0], true);
        return;
    }
    if (!c.candidates.empty()) {
        std::string prefix = common_prefix(c.candidates);
        if (prefix.size() > partial.size()) {
            replace(prefix, false);
            return;
        }
    }
    if (c.candidates.empty() && c.hints.empty()) {
        write_("\a");
        return;
    }
    list(c);
}

void LineEditor::key_csi(const std::string& params, char final) {
    switch (final) {
    case 'A':
        if (hist_pos_ > 0) recall(hist_pos_ - 1);
        break;
    case 'B':
        if (hist_pos_ < history_.size()) recall(hist_pos_ + 1);
        break;
    case 'C':
        if (cursor_ < buf_.size()) {
            ++cursor_;
            redraw();
        }
        break;
    case 'D':
        if (cursor_ > 0) {
            --cursor_;
            redraw();
        }
        break;
    case 'H':
        cursor_ = 0;
        redraw();
        break;
    case 'F':
        cursor_ = buf_.size();
        redraw();
        break;
    case '~':
        if (params == "1" || params == "7")
            key_csi("", 'H');
        else if (params == "4" || params == "8")
            key_csi("", 'F');
        else if (params == "3" && cursor_ < buf_.size())
            erase(cursor_, cursor_ + 1);
        break;
    default:
        break;
    }
}

LineEditor::Event LineEditor::feed(char c) {
    switch (state_) {
    case State::esc:
        state_ = c == '[' ? State::csi : c == 'O' ? State::ss3 : State::normal;
        params_.clear();
        return Event::none;
    case State::csi:
        if (c >= 0x30 && c <= 0x3f) {
            if (params_.size() < 16) params_ += c;
            return Event::none;
        }
        state_ = State::normal;
        if (editing_) key_csi(params_, c);
        return Event::none;
    case State::ss3:
        state_ = State::normal;
        if (editing_) key_csi("", c);
        return Event::none;
    case State::normal:
        break;
    }
    bool was_cr = after_cr_;
    after_cr_ = c == '\r';
    if (c == '\n' && was_cr) return Event::none;  // CR LF from a paste or a pipe: one line
    if (!editing_) return Event::none;            // between lines (a command is running): drop typeahead control keys
    switch (c) {
    case '\r':
    case '\n':
        write_("\r\n");
        editing_ = false;
        history_.add(buf_);
        line_ = std::move(buf_);
        buf_.clear();
        cursor_ = 0;
        return Event::line;
    case ctrl('D'):
        if (buf_.empty()) {
            write_("\r\n");
            editing_ = false;
            return Event::eof;
        }
        if (cursor_ < buf_.size()) erase(cursor_, cursor_ + 1);
        return Event::none;
    case ctrl('C'):
        write_("^C\r\n");
        begin();
        return Event::none;
    case '\t':
        complete();
        return Event::none;
    case kDel:
    case ctrl('H'):
        if (cursor_ > 0) erase(cursor_ - 1, cursor_);
        return Event::none;
    case ctrl('A'):
        key_csi("", 'H');
        return Event::none;
    case ctrl('E'):
        key_csi("", 'F');
        return Event::none;
    case ctrl('B'):
        key_csi("", 'D');
        return Event::none;
    case ctrl('F'):
        key_csi("", 'C');
        return Event::none;
    case ctrl('P'):
        key_csi("", 'A');
        return Event::none;
    case ctrl('N'):
        key_csi("", 'B');
        return Event::none;
    case ctrl('K'):
        buf_.erase(cursor_);
        redraw();
        return Event::none;
    case ctrl('U'):
        erase(0, cursor_);
        return Event::none;
    case ctrl('W'): {
        size_t from = cursor_;
        while (from > 0 && buf_[from - 1] == ' ')
            --from;
        while (from > 0 && buf_[from - 1] != ' ')
            --from;
        erase(from, cursor_);
        return Event::none;
    }
    case ctrl('L'):
        write_("\x1b[H\x1b[2J");
        redraw();
        return Event::none;
    case kEsc:
        state_ = State::esc;
        return Event::none;
    default:
        if (static_cast<unsigned char>(c) >= 0x20) insert(std::string_view(&c, 1));
        return Event::none;
    }
}

RawTerminal::RawTerminal(int fd, bool keep_signals) : fd_(fd) {
    if (!isatty(fd) || tcgetattr(fd, &saved_) != 0) return;
    struct termios raw = saved_;
    raw.c_iflag &= ~static_cast<tcflag_t>(ICRNL | INLCR | IGNCR | IXON | ISTRIP | BRKINT);
    raw.c_lflag &= ~static_cast<tcflag_t>(ECHO | ICANON | IEXTEN);
    if (!keep_signals) raw.c_lflag &= ~static_cast<tcflag_t>(ISIG);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(fd, TCSANOW, &raw) == 0;
}

RawTerminal::~RawTerminal() {
    restore();
}

void RawTerminal::restore() {
    if (active_) tcsetattr(fd_, TCSADRAIN, &saved_);
    active_ = false;
}

unsigned terminal_columns(int fd) {
    struct winsize ws {};
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}

}  // namespace egw::cli
