// SPDX-License-Identifier: Apache-2.0
//
// The line editor (control/cli/line_editor.h) fed byte by byte, as egwd's control loop and
// egwctl feed it: editing keys, escape sequences, history, TAB completion and its listing.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "control/cli/line_editor.h"

using namespace egw::cli;

namespace {

class EditorTest : public ::testing::Test {
protected:
    EditorTest()
        : ed(
              "egw> ", [this](std::string_view s) { out += s; },
              [this](const std::string& before) {
                  asked.push_back(before);
                  Completion c = completion;
                  size_t sp = before.find_last_of(' ');
                  c.partial = sp == std::string::npos ? before : before.substr(sp + 1);
                  return c;
              }) {
        ed.begin();
    }

    // Feeds every byte; returns the lines entered.
    std::vector<std::string> type(std::string_view keys) {
        std::vector<std::string> lines;
        for (char c : keys) {
            auto ev = ed.feed(c);
            if (ev == LineEditor::Event::line) {
                lines.push_back(ed.take_line());
                ed.begin();
            }
            if (ev == LineEditor::Event::eof) eof = true;
        }
        return lines;
    }

    std::string out;
    std::vector<std::string> asked;
    Completion completion;
    bool eof = false;
    LineEditor ed;
};

TEST_F(EditorTest, TypesAndEntersLines) {
    EXPECT_EQ(out, "egw> ");
    out.clear();
    EXPECT_EQ(type("show drops\r"), (std::vector<std::string>{"show drops"}));
    EXPECT_EQ(out, "show drops\r\negw> ");  // plain echo while typing at the end, then a new prompt
    EXPECT_EQ(type("a\r\nb\n"), (std::vector<std::string>{"a", "b"})) << "CR LF is one Enter, LF alone is one";
    EXPECT_EQ(type("\r"), (std::vector<std::string>{""}));
}

TEST_F(EditorTest, EditingKeys) {
    type("show dorps");
    type("\x7f\x7f\x7f");  // Backspace x3
    EXPECT_EQ(ed.text(), "show do");
    type("rops");
    EXPECT_EQ(ed.text(), "show dorops");
    type("\x01");  // Ctrl-A
    EXPECT_EQ(ed.cursor(), 0u);
    type("\x05");  // Ctrl-E
    EXPECT_EQ(ed.cursor(), ed.text().size());
    type("\x1b[D\x1b[D\x1b[D\x1b[D");  // Left x4
    EXPECT_EQ(ed.cursor(), 7u);
    type("\x1b[3~");  // Delete
    EXPECT_EQ(ed.text(), "show doops");
    type("\x08");  // Ctrl-H
    EXPECT_EQ(ed.text(), "show dops");
    type("r");
    EXPECT_EQ(ed.text(), "show drops");
    EXPECT_EQ(ed.cursor(), 7u);
    EXPECT_NE(out.find("\regw> show drops\x1b[K\x1b[3D"), std::string::npos) << "redraw puts the cursor back";
    type("\x0b");  // Ctrl-K
    EXPECT_EQ(ed.text(), "show dr");
    type("\x1b[H");  // Home
    EXPECT_EQ(ed.cursor(), 0u);
    type("\x1bOF");  // End (SS3 form)
    EXPECT_EQ(ed.cursor(), 7u);
    type("\x17");  // Ctrl-W: the word before
    EXPECT_EQ(ed.text(), "show ");
    type("x\x02\x02\x06");  // Ctrl-B x2, Ctrl-F
    EXPECT_EQ(ed.cursor(), 5u);
    type("\x15");  // Ctrl-U: to the start
    EXPECT_EQ(ed.text(), "x");
    EXPECT_EQ(ed.cursor(), 0u);
    type("\x04");  // Ctrl-D on a non-empty line: delete
    EXPECT_EQ(ed.text(), "");
    EXPECT_FALSE(eof);
    type("\x04");
    EXPECT_TRUE(eof);
}

TEST_F(EditorTest, CtrlCDropsTheLine) {
    type("show dr\x03");
    EXPECT_EQ(ed.text(), "");
    EXPECT_NE(out.find("^C\r\negw> "), std::string::npos);
    EXPECT_EQ(type("help\r"), (std::vector<std::string>{"help"}));
}

TEST_F(EditorTest, UnknownEscapesAndControlsAreIgnored) {
    type(
        "a\x1b[1;5C\x1b[Zb\x1b"
        "x\x07");
    EXPECT_EQ(ed.text(), "ab");
}

TEST_F(EditorTest, History) {
    type("show vrfs\rshow drops\rshow drops\r\r");
    EXPECT_EQ(ed.history().size(), 2u) << "blank lines and repeats are not kept";
    type("show l");
    type("\x1b[A");
    EXPECT_EQ(ed.text(), "show drops");
    type("\x10");  // Ctrl-P
    EXPECT_EQ(ed.text(), "show vrfs");
    type("\x1b[A");  // nothing older
    EXPECT_EQ(ed.text(), "show vrfs");
    type("\x1b[B\x0e");  // Down, Ctrl-N: back to what was being typed
    EXPECT_EQ(ed.text(), "show l");
    EXPECT_EQ(type("\x1b[A\r"), (std::vector<std::string>{"show drops"}));
}

TEST_F(EditorTest, HistoryFile) {
    std::string path = (std::filesystem::temp_directory_path() / ("egw-history-" + std::to_string(getpid()))).string();
    History h(3);
    for (const char* l : {"a", "b", "c", "d"})
        h.add(l);
    EXPECT_EQ(h.size(), 3u);
    EXPECT_EQ(h.at(0), "b");
    ASSERT_TRUE(h.save(path));
    History back;
    ASSERT_TRUE(back.load(path));
    EXPECT_EQ(back.size(), 3u);
    EXPECT_EQ(back.at(2), "d");
    std::remove(path.c_str());
    EXPECT_FALSE(History().load(path));
}

TEST_F(EditorTest, TabCompletesASingleCandidateWithASpace) {
    completion.candidates = {"show"};
    type("sh\t");
    EXPECT_EQ(asked.back(), "sh");
    EXPECT_EQ(ed.text(), "show ");
    EXPECT_EQ(ed.cursor(), 5u);
}

TEST_F(EditorTest, TabExtendsTheCommonPrefix) {
    completion.candidates = {"default/db", "default/web"};
    type("show service d\t");
    EXPECT_EQ(ed.text(), "show service default/");
    out.clear();
    type("\t");  // no progress possible: list the candidates
    EXPECT_EQ(ed.text(), "show service default/");
    EXPECT_NE(out.find("default/db"), std::string::npos);
    EXPECT_NE(out.find("default/web"), std::string::npos);
    EXPECT_NE(out.rfind("\regw> show service default/\x1b[K"), std::string::npos) << "the line comes back";
}

TEST_F(EditorTest, TabInTheMiddleCompletesTheWordBeforeTheCursor) {
    completion.candidates = {"port"};
    type("show po stats all");
    type("\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D");
    type("\t");
    EXPECT_EQ(asked.back(), "show po");
    EXPECT_EQ(ed.text(), "show port  stats all");
}

TEST_F(EditorTest, HintsAndBell) {
    completion.hints = {"IP: an IPv4 or IPv6 address"};
    type("show sessions saddr \t");
    EXPECT_NE(out.find("  <IP: an IPv4 or IPv6 address>\r\n"), std::string::npos);
    EXPECT_EQ(ed.text(), "show sessions saddr ");
    completion.hints.clear();
    out.clear();
    type("\t");
    EXPECT_EQ(out, "\a");
}

TEST_F(EditorTest, ListingUsesColumns) {
    ed.set_columns(30);
    completion.candidates = {"aaaa", "bbbb", "cccc", "dddd", "eeee", "ffff"};
    type("\t");
    EXPECT_NE(out.find("aaaa  bbbb  cccc  dddd  eeee\r\nffff\r\n"), std::string::npos) << out;
}

TEST_F(EditorTest, HideAndShowAroundForeignOutput) {
    type("show dr");
    out.clear();
    ed.hide();
    EXPECT_EQ(out, "\r\x1b[K");
    ed.show();
    EXPECT_EQ(out, "\r\x1b[K\regw> show dr\x1b[K");
    type("\r");
    out.clear();
    LineEditor idle(
        "p> ", [this](std::string_view s) { out += s; }, nullptr);
    idle.hide();
    idle.show();
    EXPECT_EQ(out, "") << "nothing to hide before begin()";
}

}  // namespace
