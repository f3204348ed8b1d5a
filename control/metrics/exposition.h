// SPDX-License-Identifier: Apache-2.0
//
// Prometheus text exposition, format 0.0.4 (prometheus.io/docs/instrumenting/exposition_formats).
//
// A metric family is a static descriptor, declared next to the code that fills it:
//
//     constexpr Family kDrops{"drops_total", Type::counter, "Packets dropped, by reason", {"reason"}};
//     ...
//     w.family(kDrops);
//     for (...) w.sample(kDrops, {reason}, count);
//
// The constructor is consteval: a name that breaks the conventions (characters outside
// [a-z0-9_], a counter without the `_total` suffix, a gauge with it, an empty HELP, a reserved
// or repeated label name) does not compile. The `egw_` prefix is added here, once, by the writer.
//
// The Writer emits `# HELP` and `# TYPE` when a family starts and then only its samples, so every
// family appears once and its samples stay together, as the format requires. Misuse (a family
// twice, a sample outside its family, a wrong number of label values, a series twice) is
// recorded in error() instead of being written; the HTTP handler turns it into a 500 and the
// unit tests check it, so a broken exposition never reaches Prometheus silently.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace egw::metrics {

inline constexpr std::string_view kPrefix = "egw_";
inline constexpr size_t kMaxLabels = 6;

enum class Type { counter, gauge, histogram };

struct Family {
    std::string_view name;  // without the prefix
    Type type;
    std::string_view help;
    std::array<std::string_view, kMaxLabels> labels{};
    size_t n_labels = 0;

    consteval Family(std::string_view n, Type t, std::string_view h, std::initializer_list<std::string_view> l = {})
        : name(n), type(t), help(h) {
        if (!valid_name(n)) throw "metric names are lower-case snake case: [a-z][a-z0-9_]*";
        bool total = ends_with(n, "_total");
        if (t == Type::counter && !total) throw "counter names end in _total";
        if (t != Type::counter && total) throw "only counters end in _total";
        if (t == Type::histogram && (ends_with(n, "_bucket") || ends_with(n, "_sum") || ends_with(n, "_count")))
            throw "histogram names must not end in _bucket, _sum or _count";
        if (h.empty()) throw "every family needs a HELP text";
        if (l.size() > kMaxLabels) throw "too many labels";
        for (std::string_view label : l) {
            if (!valid_name(label) || label.starts_with("__"))
                throw "label names are lower-case snake case and do not start with __";
            if (t == Type::histogram && label == "le") throw "le is the histogram's own label";
            for (size_t i = 0; i < n_labels; ++i)
                if (labels[i] == label) throw "a label name appears twice";
            labels[n_labels++] = label;
        }
    }

private:
    static constexpr bool valid_name(std::string_view s) {
        if (s.empty() || s.front() < 'a' || s.front() > 'z') return false;
        for (char c : s)
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
        return true;
    }
    static constexpr bool ends_with(std::string_view s, std::string_view suffix) {
        return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
    }
};

// A histogram's state: bucket upper bounds (ascending, +Inf implied) and per-bucket counts.
class Histogram {
public:
    explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
    void observe(double v);
    // Counts kept elsewhere (one per bound, then +Inf; not cumulative) and their sum.
    void set(std::vector<uint64_t> counts, double sum);
    const std::vector<double>& bounds() const { return bounds_; }
    const std::vector<uint64_t>& counts() const { return counts_; }  // not cumulative; last is +Inf
    double sum() const { return sum_; }
    uint64_t count() const { return count_; }

private:
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_;
    double sum_ = 0;
    uint64_t count_ = 0;
};

class Writer {
public:
    explicit Writer(std::string& out) : out_(out) {}

    // Starts a family: its HELP and TYPE lines, even if no sample follows.
    void family(const Family& f);
    // One sample of the family started last; label values in the descriptor's order.
    void sample(const Family& f, std::initializer_list<std::string_view> values, uint64_t v);
    void sample(const Family& f, std::initializer_list<std::string_view> values, double v);
    // The `_bucket`, `_sum` and `_count` series of one histogram.
    void histogram(const Family& f, std::initializer_list<std::string_view> values, const Histogram& h);

    // Empty when the exposition is well formed.
    const std::string& error() const { return error_; }

private:
    bool check(const Family& f, std::initializer_list<std::string_view> values);
    void series(const Family& f, std::string_view suffix, std::initializer_list<std::string_view> values,
                std::string_view le, std::string_view value);
    void fail(std::string message);

    std::string& out_;
    std::string error_;
    const Family* current_ = nullptr;
    std::set<std::string, std::less<>> families_;
    std::set<std::string, std::less<>> series_;
};

// Text helpers, exposed for the tests.
std::string escape_label_value(std::string_view v);  // backslash, double quote, newline
std::string escape_help(std::string_view v);         // backslash, newline
std::string format_value(double v);                  // shortest round trip; NaN, +Inf, -Inf
std::string format_value(uint64_t v);

inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace egw::metrics
