// SPDX-License-Identifier: Apache-2.0
//
// Fuzz target: the CLI (control/cli) without a daemon behind it: egw's own command table through
// the grammar engine, the socket protocol's framing in both directions, and the line editor.
//
// Byte 0 picks what the rest is:
//   0  request lines, as egwd's socket server splits them ("run LINE" parses, "complete TEXT"
//      completes, and the completion crosses the protocol and back)
//   1  bytes from egwd as egwctl reads them: responses, and completion bodies
//   2  keystrokes into the line editor (TAB completes with the grammar; Enter parses the line)
//   3  one free line: parse, complete and help
// Invariants: a parse gives a command, a blank line or an error that says something; a response
// and a completion survive encoding and decoding unchanged; the editor's cursor stays in its line.
#include <string>
#include <vector>

#include "control/cli/cli.h"
#include "control/cli/grammar.h"
#include "control/cli/line_editor.h"
#include "control/cli/protocol.h"
#include "tests/fuzz/fuzz.h"

namespace {

using namespace egw::cli;

class Names : public NameSource {
public:
    std::vector<std::string> names(NameSet set) const override {
        switch (set) {
        case NameSet::ports:
            return {"0", "pods", "1", "ext1", "2", "ext2"};
        case NameSet::services:
            return {"default/db", "default/web", "shop/cart"};
        case NameSet::namespaces:
            return {"default", "shop"};
        case NameSet::vrfs:
            return {"default", "254", "blue", "100"};
        default:
            return {};
        }
    }
};

const Names g_names;

void check_parse(std::string_view line) {
    ParseResult r = egw_grammar().parse(line, g_names);
    if (!r.command && !r.blank && r.error.empty())
        egw::fuzz::fail("a line neither parsed nor failed with a message: \"" + std::string(line) + "\"");
    if (r.command && !r.error.empty())
        egw::fuzz::fail("a line parsed and failed at once: \"" + std::string(line) + "\"");
}

void check_complete(std::string_view before) {
    Completion c = egw_grammar().complete(before, g_names);
    Completion back = decode_completion(encode_completion(c), before);
    if (back.candidates != c.candidates || back.hints != c.hints)
        egw::fuzz::fail("a completion changed across the protocol for \"" + std::string(before) + "\"");
    if (back.partial != partial_word(before))
        egw::fuzz::fail("the decoded completion's partial word is not the typed one");
}

void check_response(Status s, const std::string& body) {
    std::string wire = encode_response(s, body);
    Response r;
    if (!decode_response(wire, r) || r.status != s || r.body != body || !wire.empty())
        egw::fuzz::fail("a response did not survive encoding and decoding");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    egw::fuzz::Reader in(data, size);
    const uint8_t mode = in.byte() & 3;
    const std::string rest = in.take();

    switch (mode) {
    case 0: {
        size_t start = 0;
        for (size_t nl; (nl = rest.find('\n', start)) != std::string::npos; start = nl + 1) {
            std::string_view line(rest.data() + start, nl - start);
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (line.size() > kMaxRequest) break;
            size_t sp = line.find(' ');
            std::string_view kind = line.substr(0, sp);
            std::string_view arg = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
            if (kind == "run")
                check_parse(arg);
            else if (kind == "complete")
                check_complete(arg);
        }
        break;
    }
    case 1: {
        std::string buf = rest;
        Response r;
        try {
            while (decode_response(buf, r))
                (void)decode_completion(r.body, "show p");
        } catch (const ProtocolError&) {
        }
        (void)decode_completion(rest, rest);
        check_response(Status::error, rest);
        break;
    }
    case 2: {
        std::string screen;
        LineEditor ed(
            "egw> ", [&](std::string_view s) { screen.append(s); },
            [](const std::string& before) { return egw_grammar().complete(before, g_names); });
        ed.begin();
        for (char c : rest) {
            LineEditor::Event e = ed.feed(c);
            if (ed.cursor() > ed.text().size()) egw::fuzz::fail("the editor's cursor is past the end of its line");
            if (e == LineEditor::Event::line) {
                std::string line = ed.take_line();
                check_parse(line);
                ed.history().add(line);
                ed.begin();
            } else if (e == LineEditor::Event::eof) {
                ed.begin();
            }
            if (screen.size() > (1u << 20)) screen.clear();
        }
        break;
    }
    case 3:
        check_parse(rest);
        check_complete(rest);
        (void)egw_grammar().help(rest);
        (void)split_words(rest);
        break;
    }
    return 0;
}
