// SPDX-License-Identifier: Apache-2.0
//
// Unit tests of the pieces that need no server: the watch stream splitter, event decoding,
// backoff, MicroTime, base64, URL encoding and error descriptions.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "control/k8s/backoff.h"
#include "control/k8s/credentials.h"
#include "control/k8s/http.h"
#include "control/k8s/watch_stream.h"
#include "control/k8s/writer.h"

namespace egw::k8s {
namespace {

using nlohmann::json;

// A stream of n events whose strings contain everything that could confuse a splitter.
std::vector<json> sample_events(int n) {
    std::vector<json> out;
    for (int i = 0; i < n; ++i) {
        json obj = {{"kind", "Node"},
                    {"apiVersion", "v1"},
                    {"metadata",
                     {{"name", "node-" + std::to_string(i)},
                      {"resourceVersion", std::to_string(1000 + i)},
                      {"annotations",
                       {{"tricky", "braces { } [ ] quotes \" \\\" backslash \\ newline \n tab \t"},
                        {"unicode", "h\u00e9 \u2603 \xf0\x9f\x98\x80"},
                        {"empty", ""}}}}},
                    {"status",
                     {{"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})},
                      {"numbers", {1, 2.5, -3, nullptr, true}}}}};
        out.push_back({{"type", i % 3 == 0 ? "ADDED" : i % 3 == 1 ? "MODIFIED" : "DELETED"}, {"object", obj}});
    }
    return out;
}

std::string serialize(const std::vector<json>& events, const std::string& sep = "\n") {
    std::string s;
    for (const auto& e : events)
        s += e.dump() + sep;
    return s;
}

std::vector<json> split(const std::string& stream, const std::vector<size_t>& cuts) {
    EventSplitter sp;
    std::vector<json> got;
    size_t pos = 0;
    for (size_t len : cuts) {
        len = std::min(len, stream.size() - pos);
        sp.feed(std::string_view(stream).substr(pos, len), [&](json&& j) { got.push_back(std::move(j)); });
        pos += len;
    }
    sp.feed(std::string_view(stream).substr(pos), [&](json&& j) { got.push_back(std::move(j)); });
    EXPECT_EQ(sp.pending(), 0u);
    return got;
}

TEST(EventSplitter, WholeStreamAtOnce) {
    auto events = sample_events(10);
    EXPECT_EQ(split(serialize(events), {}), events);
}

TEST(EventSplitter, ByteByByte) {
    auto events = sample_events(7);
    const std::string s = serialize(events);
    EXPECT_EQ(split(s, std::vector<size_t>(s.size(), 1)), events);
}

TEST(EventSplitter, RandomChunking) {
    auto events = sample_events(25);
    const std::string s = serialize(events);
    for (unsigned seed = 1; seed <= 200; ++seed) {
        std::mt19937 rng(seed);
        std::uniform_int_distribution<size_t> len(0, seed % 2 ? 7 : 600);  // includes empty chunks
        std::vector<size_t> cuts;
        for (size_t total = 0; total < s.size();) {
            cuts.push_back(len(rng));
            total += cuts.back();
        }
        ASSERT_EQ(split(s, cuts), events) << "seed " << seed;
    }
}

TEST(EventSplitter, NoNewlinesOrExtraWhitespace) {
    auto events = sample_events(5);
    EXPECT_EQ(split(serialize(events, ""), {}), events);
    EXPECT_EQ(split(serialize(events, " \r\n\t\n"), {3, 1, 50, 2}), events);
    // Pretty-printed objects (newlines inside an event) are fine as well.
    std::string pretty;
    for (const auto& e : events)
        pretty += e.dump(2) + "\n";
    EXPECT_EQ(split(pretty, {10, 10, 100}), events);
}

TEST(EventSplitter, KeepsAnUnfinishedEvent) {
    const std::string one = sample_events(1)[0].dump();
    EventSplitter sp;
    int n = 0;
    sp.feed(one.substr(0, 40), [&](json&&) { ++n; });
    EXPECT_EQ(n, 0);
    EXPECT_EQ(sp.pending(), 40u);
    sp.reset();  // a cut stream: the next stream starts afresh
    EXPECT_EQ(sp.pending(), 0u);
    sp.feed(one + "\n" + one.substr(0, 5), [&](json&&) { ++n; });
    EXPECT_EQ(n, 1);
    EXPECT_EQ(sp.pending(), 5u);
}

TEST(EventSplitter, RejectsMalformedInput) {
    EventSplitter sp;
    auto ignore = [](json&&) {};
    EXPECT_THROW(sp.feed("{\"type\": }\n", ignore), StreamError);
    EventSplitter sp2;
    EXPECT_THROW(sp2.feed("garbage\n", ignore), StreamError);
    EventSplitter sp3;
    EXPECT_THROW(sp3.feed("{\"a\":1}]", ignore), StreamError);
    EventSplitter small(16);
    EXPECT_THROW(small.feed("{\"a\":\"0123456789012345\"}", ignore), StreamError);
    // A number no double holds: the JSON parser throws out_of_range, which must become a
    // StreamError like any other malformed event (the watch fuzzer found it escaping).
    EventSplitter huge;
    EXPECT_THROW(huge.feed("{\"a\":55555e55555555555}\n", ignore), StreamError);
    EventSplitter huge_split;
    huge_split.feed("{\"a\":1e4", ignore);
    EXPECT_THROW(huge_split.feed("00}\n", ignore), StreamError);
}

TEST(WatchEvent, Decodes) {
    auto ev = to_watch_event(json::parse(R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}})"));
    EXPECT_EQ(ev.type, EventType::bookmark);
    EXPECT_EQ(ev.object["metadata"]["resourceVersion"], "7");
    ev = to_watch_event(json::parse(R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})"));
    EXPECT_EQ(ev.type, EventType::error);
    EXPECT_EQ(api_status(ev.object).code, 410);
    EXPECT_THROW(to_watch_event(json::parse(R"({"type":"RENAMED","object":{}})")), StreamError);
    EXPECT_THROW(to_watch_event(json::parse(R"({"type":"ADDED"})")), StreamError);
    EXPECT_THROW(to_watch_event(json::parse(R"([1])")), StreamError);
}

TEST(Backoff, GrowsWithJitterUpToTheCap) {
    Backoff b(std::chrono::milliseconds(100), std::chrono::milliseconds(1000), 2.0, 0.5);
    const long bases[] = {100, 200, 400, 800, 1000, 1000, 1000};
    for (long base : bases) {
        auto d = b.next().count();
        EXPECT_GE(d, base);
        EXPECT_LT(d, base * 3 / 2 + 1);
    }
    b.reset();
    EXPECT_LT(b.next().count(), 151);
    // The jitter spreads the delays.
    std::set<long> seen;
    for (int i = 0; i < 20; ++i) {
        Backoff j(std::chrono::milliseconds(1000), std::chrono::milliseconds(1000));
        seen.insert(j.next().count());
    }
    EXPECT_GT(seen.size(), 5u);
}

TEST(MicroTime, RoundTrip) {
    using namespace std::chrono;
    auto t = system_clock::time_point(seconds(1714557600) + microseconds(123456));
    EXPECT_EQ(format_micro_time(t), "2024-05-01T10:00:00.123456Z");
    EXPECT_EQ(parse_micro_time("2024-05-01T10:00:00.123456Z"), t);
    EXPECT_EQ(parse_micro_time("2024-05-01T10:00:00Z"), system_clock::time_point(seconds(1714557600)));
    EXPECT_EQ(parse_micro_time("2024-05-01T12:00:00.123456+02:00"), t);
    EXPECT_EQ(parse_micro_time("2024-05-01T10:00:00.1234567891Z"), t);
    EXPECT_FALSE(parse_micro_time("2024-05-01 10:00"));
    EXPECT_FALSE(parse_micro_time("2024-13-01T10:00:00Z"));
    EXPECT_FALSE(parse_micro_time("2024-05-01T10:00:00"));
}

TEST(Base64, Decodes) {
    EXPECT_EQ(base64_decode("aGVsbG8gd29ybGQ="), "hello world");
    EXPECT_EQ(base64_decode("aGVsbG8gd29ybGQ"), "hello world");
    EXPECT_EQ(base64_decode("aGVs\nbG8="), "hello");
    EXPECT_EQ(base64_decode(""), "");
    EXPECT_THROW(base64_decode("a*b="), CredentialError);
}

TEST(Http, UrlEncodeAndDescribe) {
    EXPECT_EQ(url_encode("app in (a,b),!x"), "app%20in%20%28a%2Cb%29%2C%21x");
    EXPECT_EQ(url_encode("a-b_c.d~e"), "a-b_c.d~e");
    Response r;
    r.status = 409;
    r.body = R"({"kind":"Status","code":409,"reason":"Conflict","message":"the object has been modified"})";
    EXPECT_EQ(describe(r), "HTTP 409 Conflict: the object has been modified");
    r.status = 502;
    r.body = "<html>bad gateway</html>";
    EXPECT_EQ(describe(r), "HTTP 502 Bad Gateway: <html>bad gateway</html>");
    Response t;
    t.error = "Connection refused";
    EXPECT_EQ(describe(t), "transport: Connection refused");
}

}  // namespace
}  // namespace egw::k8s
