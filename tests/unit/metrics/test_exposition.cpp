// SPDX-License-Identifier: Apache-2.0
//
// The Prometheus text writer (control/metrics/exposition.h): number and text formatting, one
// HELP/TYPE per family, label order, histograms, and every kind of misuse ending in error().
#include "control/metrics/exposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

using namespace egw::metrics;

constexpr Family kRequests{"requests_total", Type::counter, "Requests handled", {"code", "method"}};
constexpr Family kTemperature{"temperature_celsius", Type::gauge, "A gauge without labels"};
constexpr Family kLatency{"latency_seconds", Type::histogram, "How long it took", {"path"}};
constexpr Family kQuoted{"quoted_total", Type::counter, "Back\\slash and\nnewline in HELP", {"v"}};

// Descriptors are checked while compiling; these hold what the constructor stored.
static_assert(kRequests.n_labels == 2);
static_assert(kRequests.labels[1] == "method");
static_assert(kTemperature.n_labels == 0);

TEST(Format, Integers) {
    EXPECT_EQ(format_value(uint64_t{0}), "0");
    EXPECT_EQ(format_value(uint64_t{42}), "42");
    EXPECT_EQ(format_value(std::numeric_limits<uint64_t>::max()), "18446744073709551615");
}

TEST(Format, DoublesRoundTripInShortestForm) {
    EXPECT_EQ(format_value(0.0), "0");
    EXPECT_EQ(format_value(1.5), "1.5");
    EXPECT_EQ(format_value(0.0001), "0.0001");
    EXPECT_EQ(format_value(0.00025), "0.00025");
    EXPECT_EQ(format_value(2.5), "2.5");
    EXPECT_EQ(format_value(1795289095.25), "1795289095.25");
    EXPECT_EQ(format_value(1e20), "1e+20");
    EXPECT_EQ(format_value(1e-9), "1e-09");
    EXPECT_EQ(format_value(-2.5), "-2.5");
    for (double v : {0.1, 1.0 / 3, 6.02214076e23, 1e-9, 123456.789})
        EXPECT_EQ(std::stod(format_value(v)), v) << format_value(v);
}

TEST(Format, SpecialValuesUsePrometheusSpelling) {
    EXPECT_EQ(format_value(std::nan("")), "NaN");
    EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
    EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(Escape, LabelValues) {
    EXPECT_EQ(escape_label_value("plain/name-1"), "plain/name-1");
    EXPECT_EQ(escape_label_value("a\"b"), "a\\\"b");
    EXPECT_EQ(escape_label_value("a\\b"), "a\\\\b");
    EXPECT_EQ(escape_label_value("a\nb"), "a\\nb");
}

TEST(Escape, HelpKeepsQuotes) {
    EXPECT_EQ(escape_help("say \"hi\""), "say \"hi\"");
    EXPECT_EQ(escape_help("a\\b\nc"), "a\\\\b\\nc");
}

TEST(Writer, FamilyHeaderThenSamplesWithThePrefix) {
    std::string out;
    Writer w(out);
    w.family(kRequests);
    w.sample(kRequests, {"200", "GET"}, uint64_t{7});
    w.sample(kRequests, {"404", "GET"}, uint64_t{1});
    w.family(kTemperature);
    w.sample(kTemperature, {}, 21.5);
    EXPECT_EQ(w.error(), "");
    EXPECT_EQ(out,
              "# HELP egw_requests_total Requests handled\n"
              "# TYPE egw_requests_total counter\n"
              "egw_requests_total{code=\"200\",method=\"GET\"} 7\n"
              "egw_requests_total{code=\"404\",method=\"GET\"} 1\n"
              "# HELP egw_temperature_celsius A gauge without labels\n"
              "# TYPE egw_temperature_celsius gauge\n"
              "egw_temperature_celsius 21.5\n");
}

TEST(Writer, FamilyWithoutSamplesStillDeclaresItself) {
    std::string out;
    Writer w(out);
    w.family(kRequests);
    EXPECT_EQ(w.error(), "");
    EXPECT_EQ(out, "# HELP egw_requests_total Requests handled\n# TYPE egw_requests_total counter\n");
}

TEST(Writer, EscapesHelpAndLabelValues) {
    std::string out;
    Writer w(out);
    w.family(kQuoted);
    w.sample(kQuoted, {"x\"y\\z\n"}, uint64_t{1});
    EXPECT_EQ(w.error(), "");
    EXPECT_EQ(out,
              "# HELP egw_quoted_total Back\\\\slash and\\nnewline in HELP\n"
              "# TYPE egw_quoted_total counter\n"
              "egw_quoted_total{v=\"x\\\"y\\\\z\\n\"} 1\n");
}

TEST(Writer, HistogramBucketsAreCumulativeAndEndAtInf) {
    Histogram h({0.25, 1, 2});
    for (double v : {0.125, 0.25, 0.5, 1.5, 1.5, 4.0})
        h.observe(v);
    EXPECT_EQ(h.count(), 6u);
    EXPECT_EQ(h.counts(), (std::vector<uint64_t>{2, 1, 2, 1}));  // a bound is inclusive (le)
    std::string out;
    Writer w(out);
    w.family(kLatency);
    w.histogram(kLatency, {"/metrics"}, h);
    EXPECT_EQ(w.error(), "");
    EXPECT_EQ(out,
              "# HELP egw_latency_seconds How long it took\n"
              "# TYPE egw_latency_seconds histogram\n"
              "egw_latency_seconds_bucket{path=\"/metrics\",le=\"0.25\"} 2\n"
              "egw_latency_seconds_bucket{path=\"/metrics\",le=\"1\"} 3\n"
              "egw_latency_seconds_bucket{path=\"/metrics\",le=\"2\"} 5\n"
              "egw_latency_seconds_bucket{path=\"/metrics\",le=\"+Inf\"} 6\n"
              "egw_latency_seconds_sum{path=\"/metrics\"} 7.875\n"
              "egw_latency_seconds_count{path=\"/metrics\"} 6\n");
}

TEST(Writer, EmptyHistogram) {
    Histogram h({1});
    std::string out;
    Writer w(out);
    w.family(kLatency);
    w.histogram(kLatency, {"/"}, h);
    EXPECT_EQ(w.error(), "");
    EXPECT_NE(out.find("egw_latency_seconds_bucket{path=\"/\",le=\"1\"} 0\n"), std::string::npos);
    EXPECT_NE(out.find("egw_latency_seconds_count{path=\"/\"} 0\n"), std::string::npos);
}

TEST(WriterErrors, FamilyTwice) {
    std::string out;
    Writer w(out);
    w.family(kTemperature);
    w.family(kTemperature);
    EXPECT_EQ(w.error(), "family egw_temperature_celsius started twice");
    EXPECT_EQ(out.find("# HELP", 10), std::string::npos) << out;
}

TEST(WriterErrors, SampleOutsideItsFamily) {
    std::string out;
    Writer w(out);
    w.family(kRequests);
    w.sample(kTemperature, {}, 1.0);
    EXPECT_EQ(w.error(), "sample of egw_temperature_celsius outside its family");
}

TEST(WriterErrors, SampleBeforeAnyFamily) {
    std::string out;
    Writer w(out);
    w.sample(kTemperature, {}, 1.0);
    EXPECT_EQ(w.error(), "sample of egw_temperature_celsius outside its family");
    EXPECT_EQ(out, "");
}

TEST(WriterErrors, WrongNumberOfLabelValues) {
    std::string out;
    Writer w(out);
    w.family(kRequests);
    w.sample(kRequests, {"200"}, uint64_t{1});
    EXPECT_EQ(w.error(), "egw_requests_total takes 2 label values, got 1");
}

TEST(WriterErrors, SameSeriesTwice) {
    std::string out;
    Writer w(out);
    w.family(kRequests);
    w.sample(kRequests, {"200", "GET"}, uint64_t{1});
    w.sample(kRequests, {"200", "GET"}, uint64_t{2});
    EXPECT_EQ(w.error(), "series egw_requests_total{code=\"200\",method=\"GET\"} written twice");
    EXPECT_EQ(out.find(" 2\n"), std::string::npos);
}

TEST(WriterErrors, HistogramThroughSampleAndBack) {
    std::string out;
    Writer w(out);
    w.family(kLatency);
    w.sample(kLatency, {"/"}, 1.0);
    EXPECT_EQ(w.error(), "use histogram() for latency_seconds");
    std::string out2;
    Writer w2(out2);
    w2.family(kTemperature);
    w2.histogram(kTemperature, {}, Histogram({1}));
    EXPECT_EQ(w2.error(), "temperature_celsius is not a histogram");
}

TEST(WriterErrors, FirstErrorIsKept) {
    std::string out;
    Writer w(out);
    w.sample(kTemperature, {}, 1.0);
    w.family(kRequests);
    w.family(kRequests);
    EXPECT_EQ(w.error(), "sample of egw_temperature_celsius outside its family");
}

}  // namespace
