// SPDX-License-Identifier: Apache-2.0
//
// The grammar engine (control/cli/grammar.h) on a small table of its own: pattern compilation,
// matching with optional groups in any order, argument checks, the error messages, completion
// and help.
#include <gtest/gtest.h>

#include "control/cli/grammar.h"
#include "tests/unit/cli/fake_names.h"

using namespace egw::cli;
using egw::test::FakeNames;

namespace {

bool digits(std::string_view s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

const ArgKind kKinds[] = {
    {"PORTS", "a port name, or all", {"all"}, NameSet::ports, true},
    {"N", "a number", {}, NameSet::none, false, digits},
    {"NAME", "a service name", {}, NameSet::services, false},
    {"COLOR", "red or blue", {"red", "blue"}, NameSet::none, true},
    {"SECTION", "a section, or all", {}, NameSet::sections, true},
};

const Section kSections[] = {
    {"one", "the first section"},
    {"two", "the second section"},
};

const Command kCommands[] = {
    {"show port stats PORTS", "one", "port counters", nullptr},
    {"show port xstats PORTS", "one", "extended counters", nullptr},
    {"show things [color COLOR] [limit N] [NAME]", "one", "things, filtered", nullptr},
    {"show thing NAME", "two", "one thing", nullptr},
    {"clear things", "two", "forget the things", nullptr},
    {"help [SECTION]", "two", "this", nullptr},
};

class GrammarTest : public ::testing::Test {
protected:
    GrammarTest() : g(kCommands, kKinds, kSections) {
        names.sets[NameSet::ports] = {"0", "1", "ext1", "pods"};
        names.sets[NameSet::services] = {"default/db", "default/web", "shop/cart"};
    }
    ParseResult parse(std::string_view line) { return g.parse(line, names); }
    std::string error(std::string_view line) {
        auto r = parse(line);
        EXPECT_EQ(r.command, nullptr) << line;
        return r.error;
    }
    Completion complete(std::string_view line) { return g.complete(line, names); }

    Grammar g;
    FakeNames names;
};

TEST_F(GrammarTest, MatchesRequiredWordsAndArguments) {
    auto r = parse("show port stats all");
    ASSERT_NE(r.command, nullptr) << r.error;
    EXPECT_EQ(r.command, &kCommands[0]);
    EXPECT_EQ(r.args.get("PORTS"), "all");
    r = parse("  show   port xstats\tpods ");
    ASSERT_EQ(r.command, &kCommands[1]);
    EXPECT_EQ(r.args.get("PORTS"), "pods");
    EXPECT_FALSE(r.json);
}

TEST_F(GrammarTest, OptionalGroupsInAnyOrderKeyedByTheirKeyword) {
    auto r = parse("show things limit 5 color red");
    ASSERT_EQ(r.command, &kCommands[2]) << r.error;
    EXPECT_EQ(r.args.get("limit"), "5");
    EXPECT_EQ(r.args.get("color"), "red");
    EXPECT_FALSE(r.args.has("NAME"));
    r = parse("show things anything color blue");
    ASSERT_EQ(r.command, &kCommands[2]) << r.error;
    EXPECT_EQ(r.args.get("NAME"), "anything");  // a group without keyword: keyed by placeholder
    r = parse("show things");
    ASSERT_EQ(r.command, &kCommands[2]);
    EXPECT_TRUE(r.args.values.empty());
    EXPECT_EQ(r.args.get("limit", "100"), "100");
}

TEST_F(GrammarTest, AGroupMatchesOnce) {
    // The second "limit" is no keyword any more: only the NAME group takes it, and "6" is left over.
    EXPECT_EQ(error("show things limit 5 limit 6"),
              "unexpected \"6\" after \"show things limit 5 limit\": expected one of color; "
              "usage: show things [color COLOR] [limit N] [NAME]");
    EXPECT_EQ(error("show port stats all all"),
              "unexpected \"all\" after \"show port stats all\": the command ends there; usage: show port stats PORTS");
}

TEST_F(GrammarTest, JsonAnywhereIsTakenOut) {
    auto r = parse("show --json port stats 1");
    ASSERT_EQ(r.command, &kCommands[0]);
    EXPECT_TRUE(r.json);
    EXPECT_EQ(r.args.get("PORTS"), "1");
}

TEST_F(GrammarTest, ShortJsonAnywhereToo) {
    auto r = parse("show port -j stats 1");
    ASSERT_EQ(r.command, &kCommands[0]);
    EXPECT_TRUE(r.json);
}

// Unambiguous beginnings of keywords, as testpmd and vppctl users type them.
TEST_F(GrammarTest, UnambiguousPrefixesAreExpanded) {
    auto r = parse("sh p st 1");
    ASSERT_EQ(r.command, &kCommands[0]) << r.error;
    EXPECT_EQ(r.args.get("PORTS"), "1");
    r = parse("sh p x all");
    ASSERT_EQ(r.command, &kCommands[1]) << r.error;
    r = parse("cl things");
    ASSERT_EQ(r.command, &kCommands[4]) << r.error;
    r = parse("sh things col red lim 3");
    ASSERT_EQ(r.command, &kCommands[2]) << r.error;
    EXPECT_EQ(r.args.get("color"), "red");
    EXPECT_EQ(r.args.get("limit"), "3");
    // "thing" is a whole keyword: it stays, though it begins "things" too.
    r = parse("show thing x");
    ASSERT_EQ(r.command, &kCommands[3]) << r.error;
}

TEST_F(GrammarTest, AmbiguousPrefixesNameTheCandidates) {
    // Both "show thing x" and "show things x" are commands: ambiguous.
    auto r = parse("show th x");
    EXPECT_EQ(r.command, nullptr);
    EXPECT_EQ(r.error, "ambiguous \"th\" after \"show\": thing, things");
    // Only "show things" can end there ("show thing" needs a NAME): that one.
    r = parse("show th");
    EXPECT_EQ(r.command, &kCommands[2]) << r.error;
    r = parse("x port stats 1");
    EXPECT_EQ(r.command, nullptr);
    EXPECT_EQ(r.error, "unknown command \"x\": expected one of clear, help, show (help lists them)");
    // A value is never expanded: "ext" is no port, even though "ext1" is.
    r = parse("sh port stats ext");
    EXPECT_EQ(r.command, nullptr);
    EXPECT_NE(r.error.find("bad PORTS \"ext\""), std::string::npos) << r.error;
}

TEST_F(GrammarTest, BlankLinesAndComments) {
    EXPECT_TRUE(parse("").blank);
    EXPECT_TRUE(parse("   \t ").blank);
    EXPECT_TRUE(parse("# show port stats all").blank);
    EXPECT_EQ(parse("").command, nullptr);
    EXPECT_EQ(parse("").error, "");
}

TEST_F(GrammarTest, KeywordsAreMatchedWholeBeforePrefixes) {
    EXPECT_EQ(error("shw port stats all"),
              "unknown command \"shw\": expected one of clear, help, show (help lists them)");
    EXPECT_EQ(parse("show thing default/web").command, &kCommands[3]);
    EXPECT_EQ(parse("show things").command, &kCommands[2]);
}

TEST_F(GrammarTest, ErrorsNameTheWordAndTheExpectedForm) {
    EXPECT_EQ(error("show prt"), "unknown word \"prt\" after \"show\": expected one of port, thing, things");
    EXPECT_EQ(error("show port"), "incomplete command \"show port\": expected one of stats, xstats");
    EXPECT_EQ(error("show"), "incomplete command \"show\": expected one of port, thing, things");
    EXPECT_EQ(error("show port stats"),
              "missing PORTS (a port name, or all) after \"show port stats\"; usage: show port stats PORTS");
    EXPECT_EQ(error("show port stats 7"),
              "bad PORTS \"7\" after \"show port stats\": expected a port name, or all (one of: 0, 1, all, ext1, "
              "pods); usage: show port stats PORTS");
    EXPECT_EQ(error("show things color green"),
              "bad COLOR \"green\" after \"show things color\": expected red or blue (one of: blue, red); "
              "usage: show things [color COLOR] [limit N] [NAME]");
    EXPECT_EQ(error("show things limit"),
              "missing N (a number) after \"show things limit\"; usage: show things [color COLOR] [limit N] [NAME]");
    EXPECT_EQ(error("show things limit x"),
              "bad N \"x\" after \"show things limit\": expected a number; "
              "usage: show things [color COLOR] [limit N] [NAME]");
    EXPECT_EQ(error("clear things now"),
              "unexpected \"now\" after \"clear things\": the command ends there; usage: clear things");
    EXPECT_EQ(error("help five"),
              "bad SECTION \"five\" after \"help\": expected a section, or all (one of: all, one, two); "
              "usage: help [SECTION]");
}

TEST_F(GrammarTest, ClosedKindsFollowTheLiveNames) {
    EXPECT_NE(parse("show port stats ext1").command, nullptr);
    names.sets[NameSet::ports] = {"0", "uplink"};
    EXPECT_EQ(parse("show port stats ext1").command, nullptr);
    EXPECT_NE(parse("show port stats uplink").command, nullptr);
    names.sets[NameSet::ports] = {};
    EXPECT_NE(error("show port xstats 0").find("(one of: all)"), std::string::npos);
}

TEST_F(GrammarTest, CompletesCommandWords) {
    auto c = complete("");
    EXPECT_EQ(c.partial, "");
    EXPECT_EQ(c.candidates, (std::vector<std::string>{"clear", "help", "show"}));
    c = complete("sh");
    EXPECT_EQ(c.partial, "sh");
    EXPECT_EQ(c.candidates, (std::vector<std::string>{"show"}));
    c = complete("show ");
    EXPECT_EQ(c.candidates, (std::vector<std::string>{"port", "thing", "things"}));
    c = complete("show thi");
    EXPECT_EQ(c.candidates, (std::vector<std::string>{"thing", "things"}));
    EXPECT_TRUE(complete("show x").candidates.empty());
    EXPECT_TRUE(complete("bogus ").candidates.empty());
}

TEST_F(GrammarTest, CompletesLiveNamesAndFixedWords) {
    auto c = complete("show port stats ");
    EXPECT_EQ(c.candidates, (std::vector<std::string>{"0", "1", "all", "ext1", "pods"}));
    EXPECT_TRUE(c.hints.empty());
    c = complete("show port stats p");
    EXPECT_EQ(c.candidates, (std::vector<std::string>{"pods"}));
    c = complete("show thing default/");
    EXPECT_EQ(c.candidates, (std::vector<std::string>{"default/db", "default/web"}));
    c = complete("help ");
    EXPECT_EQ(c.candidates, (std::vector<std::string>{"all", "one", "two"}));
}

TEST_F(GrammarTest, CompletesOpenGroupsAndHintsFreeArguments) {
    auto c = complete("show things ");
    // The keywords of the open groups, and the names the keyword-less group takes.
    EXPECT_EQ(c.candidates, (std::vector<std::string>{"color", "default/db", "default/web", "limit", "shop/cart"}));
    c = complete("show things color red ");
    EXPECT_EQ(c.candidates, (std::vector<std::string>{"default/db", "default/web", "limit", "shop/cart"}));
    c = complete("show things limit ");
    EXPECT_TRUE(c.candidates.empty());
    EXPECT_EQ(c.hints, (std::vector<std::string>{"N: a number"}));
    c = complete("show things color ");
    EXPECT_EQ(c.candidates, (std::vector<std::string>{"blue", "red"}));
    c = complete("show thing zzz");
    EXPECT_TRUE(c.candidates.empty());
    EXPECT_EQ(c.hints, (std::vector<std::string>{"NAME: a service name"}));
}

TEST_F(GrammarTest, CompletesJson) {
    EXPECT_EQ(complete("show port stats all --j").candidates, (std::vector<std::string>{"--json"}));
    EXPECT_EQ(complete("show --json port ").candidates, (std::vector<std::string>{"stats", "xstats"}));
    EXPECT_TRUE(complete("clear things --").candidates.empty());
}

TEST_F(GrammarTest, HelpBySection) {
    std::string overview = g.help();
    EXPECT_NE(overview.find("  one  the first section\n"), std::string::npos) << overview;
    EXPECT_NE(overview.find("  two  the second section\n"), std::string::npos);
    EXPECT_EQ(g.help("help"), overview);
    std::string one = g.help("one");
    EXPECT_EQ(one.rfind("one: the first section\n\n", 0), 0u) << one;
    EXPECT_NE(one.find("  show port stats PORTS\n      port counters\n"), std::string::npos) << one;
    EXPECT_NE(one.find("  PORTS  a port name, or all\n"), std::string::npos) << one;
    EXPECT_NE(one.find("  COLOR  red or blue\n"), std::string::npos) << one;
    EXPECT_EQ(one.find("clear things"), std::string::npos);
    std::string all = g.help("all");
    EXPECT_NE(all.find("show port stats PORTS"), std::string::npos);
    EXPECT_NE(all.find("clear things"), std::string::npos);
    EXPECT_EQ(g.help("nope"), "");
}

TEST(GrammarTable, MalformedTablesAreRefused) {
    auto build = [](const Command& c) {
        const Command cmds[] = {c};
        Grammar g(cmds, kKinds, kSections);
    };
    EXPECT_THROW(build({"show [color COLOR", "one", "", nullptr}), std::logic_error);
    EXPECT_THROW(build({"show color COLOR]", "one", "", nullptr}), std::logic_error);
    EXPECT_THROW(build({"show [color [COLOR]]", "one", "", nullptr}), std::logic_error);
    EXPECT_THROW(build({"show [limit N] things", "one", "", nullptr}), std::logic_error);
    EXPECT_THROW(build({"show WIDGET", "one", "", nullptr}), std::logic_error);
    EXPECT_THROW(build({"N things", "one", "", nullptr}), std::logic_error);
    EXPECT_THROW(build({"show things", "three", "", nullptr}), std::logic_error);
    const Command twice[] = {{"clear things", "two", "", nullptr}, {"clear things", "two", "", nullptr}};
    EXPECT_THROW(Grammar(twice, kKinds, kSections), std::logic_error);
}

TEST(GrammarHelpers, SplitAndCommonPrefix) {
    EXPECT_EQ(split_words(" a  b\tc "), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_TRUE(split_words("").empty());
    EXPECT_EQ(common_prefix({"default/db", "default/web"}), "default/");
    EXPECT_EQ(common_prefix({"thing", "things"}), "thing");
    EXPECT_EQ(common_prefix({}), "");
}

}  // namespace
