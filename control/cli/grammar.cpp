// SPDX-License-Identifier: Apache-2.0
#include "control/cli/grammar.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace egw::cli {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

bool is_placeholder(std::string_view w) {
    return !w.empty() && w[0] >= 'A' && w[0] <= 'Z';
}

std::string join(const std::vector<std::string>& words, size_t n, std::string_view sep = " ") {
    std::string out;
    for (size_t i = 0; i < n && i < words.size(); ++i) {
        if (i) out += sep;
        out += words[i];
    }
    return out;
}

std::string join_set(const std::set<std::string>& words) {
    std::string out;
    for (const auto& w : words) {
        if (!out.empty()) out += ", ";
        out += w;
    }
    return out;
}

constexpr std::string_view kJson = "--json";
constexpr std::string_view kJsonShort = "-j";
constexpr size_t kHelpWidth = 96;

// `text` folded at spaces into lines of at most `width` columns, each starting with `indent`.
std::string wrap(std::string_view text, std::string_view indent, size_t width) {
    std::string out, line(indent);
    for (const auto& w : split_words(text)) {
        if (line.size() > indent.size() && line.size() + 1 + w.size() > width) {
            out += line + "\n";
            line = indent;
        }
        if (line.size() > indent.size()) line += ' ';
        line += w;
    }
    return out + line + "\n";
}
constexpr size_t kMaxListedValues = 16;

}  // namespace

const std::string& Args::empty() {
    static const std::string e;
    return e;
}

std::vector<std::string> split_words(std::string_view line) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
            ++i;
        size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t')
            ++i;
        if (i > start) out.emplace_back(line.substr(start, i - start));
    }
    return out;
}

std::string common_prefix(const std::vector<std::string>& words) {
    if (words.empty()) return "";
    std::string p = words[0];
    for (const auto& w : words) {
        size_t n = 0;
        while (n < p.size() && n < w.size() && p[n] == w[n])
            ++n;
        p.resize(n);
    }
    return p;
}

Grammar::Grammar(std::span<const Command> commands, std::span<const ArgKind> kinds, std::span<const Section> sections)
    : commands_(commands), kinds_(kinds), sections_(sections) {
    std::set<std::string_view> patterns;
    for (const Command& cmd : commands_) {
        auto fail = [&](const std::string& why) {
            throw std::logic_error("command \"" + std::string(cmd.pattern) + "\": " + why);
        };
        if (!patterns.insert(cmd.pattern).second) fail("declared twice");
        if (std::none_of(sections_.begin(), sections_.end(), [&](const Section& s) { return s.name == cmd.section; }))
            fail("unknown section \"" + std::string(cmd.section) + "\"");
        Compiled c;
        c.command = &cmd;
        bool in_group = false;
        for (std::string w : split_words(cmd.pattern)) {
            bool opens = !w.empty() && w.front() == '[';
            if (opens) {
                if (in_group) fail("nested [");
                w.erase(0, 1);
                c.groups.emplace_back();
                in_group = true;
            }
            bool closes = !w.empty() && w.back() == ']';
            if (closes) {
                if (!in_group) fail("] without [");
                w.pop_back();
            }
            if (w.empty() || w.find_first_of("[]") != std::string::npos) fail("bad word \"" + w + "\"");
            if (!in_group && !c.groups.empty()) fail("required word \"" + w + "\" after an optional group");
            Element e;
            e.word = w;
            if (is_placeholder(w)) {
                e.kind = find_kind(w);
                if (!e.kind) fail("unknown argument kind " + w);
                e.key = in_group && !c.groups.back().empty() && !c.groups.back().front().kind
                            ? c.groups.back().front().word
                            : w;
            }
            (in_group ? c.groups.back() : c.required).push_back(std::move(e));
            if (closes) in_group = false;
        }
        if (in_group) fail("[ without ]");
        if (c.required.empty() || c.required.front().kind) fail("must start with a keyword");
        compiled_.push_back(std::move(c));
    }
}

const ArgKind* Grammar::find_kind(std::string_view placeholder) const {
    for (const ArgKind& k : kinds_)
        if (k.placeholder == placeholder) return &k;
    return nullptr;
}

std::vector<std::string> Grammar::values_of(const ArgKind& k, const NameSource& names) const {
    std::vector<std::string> out(k.words.begin(), k.words.end());
    if (k.names == NameSet::sections) {
        for (const Section& s : sections_)
            out.emplace_back(s.name);
        out.emplace_back("all");
    } else if (k.names != NameSet::none) {
        auto live = names.names(k.names);
        out.insert(out.end(), live.begin(), live.end());
    }
    return out;
}

bool Grammar::accepts(const ArgKind& k, std::string_view value, const NameSource& names) const {
    if (value == kJson) return false;
    if (k.names != NameSet::none || !k.words.empty()) {
        auto values = values_of(k, names);
        if (std::find(values.begin(), values.end(), value) != values.end()) return true;
    }
    if (k.check) return k.check(value);
    return !k.closed;
}

// The unused optional group a word opens: by its keyword first, else by an argument accepting it.
int Grammar::find_group(const Compiled& c, const std::vector<bool>& used, const std::string& word,
                        const NameSource& names) const {
    for (size_t k = 0; k < c.groups.size(); ++k)
        if (!used[k] && !c.groups[k].front().kind && c.groups[k].front().word == word) return static_cast<int>(k);
    for (size_t k = 0; k < c.groups.size(); ++k)
        if (!used[k] && c.groups[k].front().kind && accepts(*c.groups[k].front().kind, word, names))
            return static_cast<int>(k);
    return -1;
}

Grammar::Attempt Grammar::match(const Compiled& c, const std::vector<std::string>& words, const NameSource& names,
                                Args* args) const {
    Attempt a;
    a.c = &c;
    size_t i = 0;
    // One element against words[i]: true when it fits (recording an argument), or a failure.
    auto take = [&](const Element& e) -> bool {
        if (i == words.size()) {
            a.fail = Fail::missing;
            a.depth = i;
            a.expected = &e;
            return false;
        }
        if (!e.kind) {
            if (words[i] != e.word) {
                a.fail = Fail::word;
                a.depth = i;
                a.expected = &e;
                return false;
            }
        } else {
            if (!accepts(*e.kind, words[i], names)) {
                a.fail = Fail::arg;
                a.depth = i;
                a.expected = &e;
                return false;
            }
            if (args) args->values[e.key] = words[i];
        }
        ++i;
        return true;
    };
    for (const Element& e : c.required)
        if (!take(e)) return a;
    std::vector<bool> used(c.groups.size(), false);
    while (i < words.size()) {
        int g = find_group(c, used, words[i], names);
        if (g < 0) {
            a.depth = i;
            for (size_t k = 0; k < c.groups.size(); ++k) {
                if (used[k]) continue;
                const Element& head = c.groups[k].front();
                if (head.kind && a.fail != Fail::arg) {
                    a.fail = Fail::arg;  // a value where an optional argument may stand: say what it takes
                    a.expected = &head;
                }
                a.heads.push_back(&head);
            }
            if (a.fail != Fail::arg) a.fail = Fail::extra;
            return a;
        }
        used[static_cast<size_t>(g)] = true;
        for (const Element& e : c.groups[static_cast<size_t>(g)])
            if (!take(e)) return a;
    }
    a.depth = i;
    return a;
}

bool Grammar::next_elements(const Compiled& c, const std::vector<std::string>& words, const NameSource& names,
                            std::vector<const Element*>& out) const {
    size_t i = 0;
    auto fits = [&](const Element& e) { return e.kind ? accepts(*e.kind, words[i], names) : words[i] == e.word; };
    for (const Element& e : c.required) {
        if (i == words.size()) {
            out.push_back(&e);
            return true;
        }
        if (!fits(e)) return false;
        ++i;
    }
    std::vector<bool> used(c.groups.size(), false);
    while (i < words.size()) {
        int g = find_group(c, used, words[i], names);
        if (g < 0) return false;
        used[static_cast<size_t>(g)] = true;
        for (const Element& e : c.groups[static_cast<size_t>(g)]) {
            if (i == words.size()) {
                out.push_back(&e);
                return true;
            }
            if (!fits(e)) return false;
            ++i;
        }
    }
    for (size_t k = 0; k < c.groups.size(); ++k)
        if (!used[k]) out.push_back(&c.groups[k].front());
    return true;
}

bool Grammar::expand_prefixes(std::vector<std::string>& words, const NameSource& names, std::string& error) const {
    for (size_t i = 0; i < words.size(); ++i) {
        std::vector<std::string> before(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(i));
        std::set<std::string> keywords;
        bool fits = false;
        for (const Compiled& c : compiled_) {
            std::vector<const Element*> next;
            if (!next_elements(c, before, names, next)) continue;
            for (const Element* e : next) {
                // A keyword typed whole, or a value of a closed set (a port name, "all"), stays.
                if (e->kind ? e->kind->closed && accepts(*e->kind, words[i], names) : e->word == words[i])
                    fits = true;
                else if (!e->kind && starts_with(e->word, words[i]))
                    keywords.insert(e->word);
            }
        }
        if (fits || keywords.empty()) continue;  // as typed: the parser says what is wrong, if anything
        if (keywords.size() > 1) {
            // Several keywords begin so: take the one with which the whole line makes a command
            // ("sh serv": only "services" can end there), if exactly one does.
            std::vector<std::string> only;
            for (const auto& k : keywords) {
                std::vector<std::string> trial = words;
                trial[i] = k;
                std::string ignored;
                if (!expand_prefixes(trial, names, ignored)) continue;
                bool matches = std::any_of(compiled_.begin(), compiled_.end(), [&](const Compiled& c) {
                    return match(c, trial, names, nullptr).fail == Fail::none;
                });
                if (matches) {
                    if (!only.empty()) {
                        only.clear();
                        break;
                    }
                    only = std::move(trial);
                }
            }
            if (!only.empty()) {
                words = std::move(only);
                return true;
            }
            error = "ambiguous \"" + words[i] + "\"" + (i ? " after \"" + join(words, i) + "\"" : std::string()) +
                    ": " + join_set(keywords);
            return false;
        }
        words[i] = *keywords.begin();
    }
    return true;
}

ParseResult Grammar::parse(std::string_view line, const NameSource& names) const {
    ParseResult r;
    std::vector<std::string> words;
    for (auto& w : split_words(line)) {
        if (w == kJson || w == kJsonShort)
            r.json = true;
        else
            words.push_back(std::move(w));
    }
    if (words.empty() || words[0][0] == '#') {
        r.blank = true;
        return r;
    }
    auto try_all = [&](const std::vector<std::string>& ws, std::vector<Attempt>& attempts) {
        for (const Compiled& c : compiled_) {
            Args args;
            Attempt a = match(c, ws, names, &args);
            if (a.fail == Fail::none) {
                r.command = c.command;
                r.args = std::move(args);
                return true;
            }
            attempts.push_back(a);
        }
        return false;
    };
    // As typed first; then with keyword prefixes expanded, so a value that happens to begin a
    // keyword ("show things co" with a thing named "co") keeps meaning what was typed.
    std::vector<Attempt> attempts;
    if (try_all(words, attempts)) return r;
    std::vector<std::string> expanded = words;
    if (!expand_prefixes(expanded, names, r.error)) return r;
    if (expanded != words) {
        attempts.clear();
        if (try_all(expanded, attempts)) return r;
        words = std::move(expanded);
    }
    r.error = describe_failure(attempts, words, names);
    return r;
}

std::string Grammar::describe_failure(const std::vector<Attempt>& all, const std::vector<std::string>& words,
                                      const NameSource& names) const {
    size_t depth = 0;
    for (const Attempt& a : all)
        depth = std::max(depth, a.depth);
    std::vector<const Attempt*> best;
    for (const Attempt& a : all)
        if (a.depth == depth) best.push_back(&a);
    std::string typed = join(words, depth);
    auto usage = [](const Attempt& a) { return "; usage: " + std::string(a.c->command->pattern); };
    auto quoted = [](std::string_view s) {
        std::string q(1, '"');
        q.append(s);
        q += '"';
        return q;
    };

    for (const Attempt* a : best) {
        if (a->fail != Fail::arg) continue;
        const ArgKind& k = *a->expected->kind;
        std::string msg = "bad " + std::string(k.placeholder) + " " + quoted(words[depth]) + " after " + quoted(typed) +
                          ": expected " + std::string(k.help);
        if (k.closed) {
            auto values = values_of(k, names);
            std::set<std::string> listed;
            for (size_t n = 0; n < values.size() && n < kMaxListedValues; ++n)
                listed.insert(values[n]);
            msg += listed.empty()
                       ? " (there are none now)"
                       : " (one of: " + join_set(listed) + (values.size() > kMaxListedValues ? ", ..." : "") + ")";
        }
        return msg + usage(*a);
    }

    std::set<std::string> expected;
    const Attempt* arg_missing = nullptr;
    const Attempt* extra = nullptr;
    for (const Attempt* a : best) {
        if ((a->fail == Fail::word || a->fail == Fail::missing) && !a->expected->kind)
            expected.insert(a->expected->word);
        if (a->fail == Fail::missing && a->expected->kind && !arg_missing) arg_missing = a;
        if (a->fail == Fail::extra && !extra) extra = a;
    }
    if (depth < words.size()) {
        if (!expected.empty()) {
            if (depth == 0)
                return "unknown command " + quoted(words[0]) + ": expected one of " + join_set(expected) +
                       " (help lists them)";
            return "unknown word " + quoted(words[depth]) + " after " + quoted(typed) + ": expected one of " +
                   join_set(expected);
        }
        if (extra) {
            std::set<std::string> heads;
            for (const Element* e : extra->heads)
                heads.insert(e->word);
            std::string msg = "unexpected " + quoted(words[depth]) + " after " + quoted(typed) + ": ";
            msg += heads.empty() ? "the command ends there" : "expected one of " + join_set(heads);
            return msg + usage(*extra);
        }
    } else {
        if (arg_missing && expected.empty()) {
            const ArgKind& k = *arg_missing->expected->kind;
            return "missing " + std::string(k.placeholder) + " (" + std::string(k.help) + ") after " + quoted(typed) +
                   usage(*arg_missing);
        }
        if (arg_missing) expected.insert(std::string(arg_missing->expected->kind->placeholder));
        if (!expected.empty()) return "incomplete command " + quoted(typed) + ": expected one of " + join_set(expected);
    }
    return "cannot parse " + quoted(join(words, words.size())) + " (help lists the commands)";
}

Completion Grammar::complete(std::string_view line, const NameSource& names) const {
    Completion out;
    std::vector<std::string> words = split_words(line);
    bool at_word_start = line.empty() || line.back() == ' ' || line.back() == '\t';
    if (!at_word_start && !words.empty()) {
        out.partial = words.back();
        words.pop_back();
    }
    words.erase(std::remove(words.begin(), words.end(), std::string(kJson)), words.end());
    words.erase(std::remove(words.begin(), words.end(), std::string(kJsonShort)), words.end());
    std::set<std::string> candidates, hints;
    if (!out.partial.empty() && out.partial[0] == '-') {
        if (!words.empty() && words[0] == "show" && starts_with(kJson, out.partial))
            candidates.insert(std::string(kJson));
    } else {
        for (const Compiled& c : compiled_) {
            std::vector<const Element*> next;
            if (!next_elements(c, words, names, next)) continue;
            for (const Element* e : next) {
                if (!e->kind) {
                    if (starts_with(e->word, out.partial)) candidates.insert(e->word);
                    continue;
                }
                bool offered = false;
                for (const auto& v : values_of(*e->kind, names))
                    if (starts_with(v, out.partial)) {
                        candidates.insert(v);
                        offered = true;
                    }
                if (!offered) hints.insert(std::string(e->kind->placeholder) + ": " + std::string(e->kind->help));
            }
        }
    }
    out.candidates.assign(candidates.begin(), candidates.end());
    out.hints.assign(hints.begin(), hints.end());
    return out;
}

std::string Grammar::section_help(const Section& s) const {
    std::string out = std::string(s.name) + ": " + std::string(s.title) + "\n\n";
    std::vector<const ArgKind*> legend;
    for (const Compiled& c : compiled_) {
        if (c.command->section != s.name) continue;
        out += "  " + std::string(c.command->pattern) + "\n" + wrap(c.command->help, "      ", kHelpWidth);
        auto note = [&](const Element& e) {
            if (e.kind && std::find(legend.begin(), legend.end(), e.kind) == legend.end()) legend.push_back(e.kind);
        };
        for (const Element& e : c.required)
            note(e);
        for (const auto& g : c.groups)
            for (const Element& e : g)
                note(e);
    }
    if (!legend.empty()) {
        size_t width = 0;
        for (const ArgKind* k : legend)
            width = std::max(width, k->placeholder.size());
        out += "\n";
        for (const ArgKind* k : legend)
            out += "  " + std::string(k->placeholder) + std::string(width - k->placeholder.size() + 2, ' ') +
                   std::string(k->help) + "\n";
    }
    return out;
}

std::string Grammar::help(std::string_view section) const {
    if (section.empty() || section == "help") {
        size_t width = 0;
        for (const Section& s : sections_)
            width = std::max(width, s.name.size());
        std::string out = "Commands by section; `help SECTION` lists one, `help all` lists everything.\n\n";
        for (const Section& s : sections_)
            out +=
                "  " + std::string(s.name) + std::string(width - s.name.size() + 2, ' ') + std::string(s.title) + "\n";
        out +=
            "\nEvery show command takes --json. TAB completes commands and live names (Services, ports,\n"
            "VRFs); show commands never change anything, set and clear do.\n";
        return out;
    }
    if (section == "all") {
        std::string out;
        for (const Section& s : sections_)
            out += (out.empty() ? "" : "\n") + section_help(s);
        return out;
    }
    for (const Section& s : sections_)
        if (s.name == section) return section_help(s);
    return "";
}

}  // namespace egw::cli
