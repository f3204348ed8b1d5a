// SPDX-License-Identifier: Apache-2.0
//
// The CLI grammar engine: commands are data, and one parser and completer serve egwd's console,
// the egwctl socket and the tests.
//
// A command is a row of a table (control/cli/commands.cpp): a pattern, a section, a help text
// and a handler. Patterns use VPP's short-help notation:
//
//   show port stats PORTS                lower-case words are keywords, upper-case words arguments
//   show services [namespace NS]         [...] is an optional group
//   show sessions [service SERVICE] [limit N]
//
// The required part comes first and matches in order; the optional groups follow it, in any
// order, each at most once. An argument is named in the parsed Args by the keyword that opens its
// group ("namespace", "limit") or, outside a group or in a group without a keyword, by its
// placeholder ("PORTS").
//
// Every placeholder has an ArgKind: its help text, how a value is checked (fixed words, live names
// such as Services, ports and VRFs, or a syntax check) and what TAB offers for it. Keywords match
// whole words only: with completion there is no need for abbreviations, and `service` vs
// `services` stays unambiguous. The token `--json` may appear anywhere; it is taken out before
// matching and sets ParseResult::json.
//
// The engine knows nothing of egwd: live names come through NameSource, and the handler is an
// opaque pointer the caller invokes. Hence it links without DPDK and is unit-tested alone.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace egw::cli {

// Live name sets an argument can draw on.
enum class NameSet : uint8_t {
    none,
    ports,       // port names and DPDK port ids
    services,    // "namespace/name" of every EgressService
    namespaces,  // namespaces that hold an EgressService
    vrfs,        // VRF names and table numbers
    sections,    // help sections (the grammar's own) and "all"
};

class NameSource {
public:
    virtual ~NameSource() = default;
    // The names of `set` as of now (NameSet::sections is answered by the grammar itself).
    virtual std::vector<std::string> names(NameSet set) const = 0;
};

struct ArgKind {
    std::string_view placeholder;               // as written in patterns: "PORTS"
    std::string_view help;                      // "a port name or id, or all"
    std::vector<std::string_view> words;        // fixed values ("all", "tcp", ...)
    NameSet names = NameSet::none;              // live values, also offered by TAB
    bool closed = false;                        // the value must be one of words/names (or pass check)
    bool (*check)(std::string_view) = nullptr;  // syntax of other values; nullptr: any word
};

struct Section {
    std::string_view name;   // "ports"
    std::string_view title;  // one line for the `help` overview
};

class Context;
struct Args;
struct Reply;
using Handler = Reply (*)(Context&, const Args&);

struct Command {
    std::string_view pattern;
    std::string_view section;
    std::string_view help;
    Handler handler = nullptr;
};

struct Args {
    std::map<std::string, std::string, std::less<>> values;

    bool has(std::string_view key) const { return values.find(key) != values.end(); }
    // The value, or `fallback` when the argument was not given.
    const std::string& get(std::string_view key, const std::string& fallback = empty()) const {
        auto it = values.find(key);
        return it == values.end() ? fallback : it->second;
    }

private:
    static const std::string& empty();
};

struct ParseResult {
    const Command* command = nullptr;  // nullptr: see `error` (or a blank line)
    Args args;
    bool json = false;   // `--json` was given
    bool blank = false;  // empty line or a `#` comment: nothing to do
    std::string error;   // names the offending word and the expected form
};

struct Completion {
    std::string partial;                  // the word being completed ("" after a space)
    std::vector<std::string> candidates;  // sorted, unique: words that may replace `partial`
    std::vector<std::string> hints;       // "IP: an IPv4 or IPv6 address" for free-form arguments
};

// Splits a line into words at spaces and tabs.
std::vector<std::string> split_words(std::string_view line);

// The longest common prefix of the candidates.
std::string common_prefix(const std::vector<std::string>& words);

class Grammar {
public:
    // Compiles the patterns. Throws std::logic_error on a malformed pattern or an unknown
    // placeholder, section or duplicate pattern: the table is code, and a unit test loads it.
    Grammar(std::span<const Command> commands, std::span<const ArgKind> kinds, std::span<const Section> sections);

    ParseResult parse(std::string_view line, const NameSource& names) const;
    // Replaces each word that is the unambiguous beginning of the one keyword that may stand at
    // its place ("sh serv" -> "show services"), as testpmd and vppctl users type. A word that is a
    // whole keyword or a value of a closed set stays; one that begins several keywords is an error
    // naming them. Returns false with `error` set then. parse() uses it only when the line as
    // typed matches no command.
    bool expand_prefixes(std::vector<std::string>& words, const NameSource& names, std::string& error) const;

    // Completes the last word of `line` (the text before the cursor).
    Completion complete(std::string_view line, const NameSource& names) const;

    // "" or "help" text: the overview of sections; a section name: its commands and argument
    // legend; "all": every section. An unknown section gives "".
    std::string help(std::string_view section = {}) const;

    std::span<const Section> sections() const { return sections_; }
    std::span<const Command> commands() const { return commands_; }

private:
    struct Element {
        std::string word;               // keyword, or placeholder
        const ArgKind* kind = nullptr;  // nullptr for a keyword
        std::string key;                // Args key of an argument
    };
    struct Compiled {
        const Command* command = nullptr;
        std::vector<Element> required;
        std::vector<std::vector<Element>> groups;
    };
    enum class Fail : uint8_t { none, word, arg, missing, extra };
    struct Attempt {
        const Compiled* c = nullptr;
        Fail fail = Fail::none;
        size_t depth = 0;                   // words matched before the failure
        const Element* expected = nullptr;  // what was wanted at `depth` (word, arg, missing)
        std::vector<const Element*> heads;  // extra: the groups still open
    };

    const ArgKind* find_kind(std::string_view placeholder) const;
    bool accepts(const ArgKind& k, std::string_view value, const NameSource& names) const;
    std::vector<std::string> values_of(const ArgKind& k, const NameSource& names) const;
    int find_group(const Compiled& c, const std::vector<bool>& used, const std::string& word,
                   const NameSource& names) const;
    Attempt match(const Compiled& c, const std::vector<std::string>& words, const NameSource& names, Args* args) const;
    // Elements that may come after `words`; false when `words` do not fit the command.
    bool next_elements(const Compiled& c, const std::vector<std::string>& words, const NameSource& names,
                       std::vector<const Element*>& out) const;
    std::string describe_failure(const std::vector<Attempt>& at, const std::vector<std::string>& words,
                                 const NameSource& names) const;
    std::string section_help(const Section& s) const;

    std::span<const Command> commands_;
    std::span<const ArgKind> kinds_;
    std::span<const Section> sections_;
    std::vector<Compiled> compiled_;
};

}  // namespace egw::cli
