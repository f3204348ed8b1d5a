// SPDX-License-Identifier: Apache-2.0
#include "control/cli/console.h"

#include <poll.h>
#include <unistd.h>

#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>

#include <cerrno>

namespace egw::cli {

namespace {

void write_all(int fd, std::string_view s) {
    while (!s.empty()) {
        ssize_t n = write(fd, s.data(), s.size());
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return;
        s.remove_prefix(static_cast<size_t>(n));
    }
}

// Sends each log line through the console so that it lands above the prompt, not inside it.
class PromptSink : public spdlog::sinks::sink {
public:
    PromptSink(std::vector<std::shared_ptr<spdlog::sinks::sink>> inner, Console& console)
        : inner_(std::move(inner)), console_(console) {}

    void log(const spdlog::details::log_msg& msg) override {
        console_.hide_prompt();
        for (auto& s : inner_)
            if (s->should_log(msg.level)) {
                s->log(msg);
                s->flush();
            }
        console_.show_prompt();
    }
    void flush() override {
        for (auto& s : inner_)
            s->flush();
    }
    void set_pattern(const std::string& pattern) override {
        for (auto& s : inner_)
            s->set_pattern(pattern);
    }
    void set_formatter(std::unique_ptr<spdlog::formatter> f) override {
        for (auto& s : inner_)
            s->set_formatter(f->clone());
    }

private:
    std::vector<std::shared_ptr<spdlog::sinks::sink>> inner_;
    Console& console_;
};

}  // namespace

Console::Console(Cli& cli) : cli_(cli) {
    terminal_ = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    if (!terminal_) return;
    raw_ = std::make_unique<RawTerminal>(STDIN_FILENO);
    editor_ = std::make_unique<LineEditor>(
        "egw> ", [this](std::string_view s) { out(s); },
        [this](const std::string& before) { return cli_.complete(before); });
    editor_->set_columns(terminal_columns(STDOUT_FILENO));
    auto logger = spdlog::default_logger();
    saved_sinks_ = logger->sinks();
    logger->sinks() = {std::make_shared<PromptSink>(saved_sinks_, *this)};
    std::lock_guard lock(mu_);
    out("egwd console: `help` lists the commands, TAB completes, `quit` or Ctrl-D stops egwd\r\n");
    editor_->begin();
}

Console::~Console() {
    if (!terminal_) return;
    spdlog::default_logger()->sinks() = saved_sinks_;
    std::lock_guard lock(mu_);
    editor_->hide();
    raw_->restore();
}

void Console::out(std::string_view s) {
    write_all(STDOUT_FILENO, s);
}

// Each step takes the lock on its own: holding it across the log line would deadlock with a
// command that logs while the console runs it.
void Console::hide_prompt() {
    std::lock_guard lock(mu_);
    if (editor_) editor_->hide();
}

void Console::show_prompt() {
    std::lock_guard lock(mu_);
    if (editor_) editor_->show();
}

bool Console::run_line(const std::string& line) {
    Cli::Outcome o = cli_.run(line, Origin::console);
    std::lock_guard lock(mu_);
    if (terminal_ && o.status == Status::error) out("\x1b[1m");
    out(o.text);
    if (terminal_ && o.status == Status::error) out("\x1b[0m");
    if (o.status == Status::bye) return false;
    if (editor_) editor_->begin();
    return true;
}

bool Console::poll() {
    if (!open_) return true;
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) return true;
    char buf[512];
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) {
        open_ = false;
        if (terminal_) return false;  // the terminal went away
        if (!pending_.empty()) return run_line(std::exchange(pending_, {}));
        spdlog::info("console input ended; egwd keeps running (stop it with a signal)");
        return true;
    }
    for (ssize_t i = 0; i < n; ++i) {
        char c = buf[i];
        if (!terminal_) {
            if (c != '\n') {
                pending_ += c;
                continue;
            }
            if (!pending_.empty() && pending_.back() == '\r') pending_.pop_back();
            if (!run_line(std::exchange(pending_, {}))) return false;
            continue;
        }
        LineEditor::Event ev;
        std::string line;
        {
            std::lock_guard lock(mu_);
            ev = editor_->feed(c);
            if (ev == LineEditor::Event::line) line = editor_->take_line();
        }
        if (ev == LineEditor::Event::eof) {
            out("stopping egwd\r\n");
            return false;
        }
        if (ev == LineEditor::Event::line && !run_line(line)) return false;
    }
    return true;
}

}  // namespace egw::cli
