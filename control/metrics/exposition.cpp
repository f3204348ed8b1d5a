// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/exposition.h"

#include <charconv>
#include <cmath>

namespace egw::metrics {

void Histogram::observe(double v) {
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i])
        ++i;
    ++counts_[i];
    sum_ += v;
    ++count_;
}

void Histogram::set(std::vector<uint64_t> counts, double sum) {
    counts.resize(bounds_.size() + 1);
    counts_ = std::move(counts);
    sum_ = sum;
    count_ = 0;
    for (uint64_t c : counts_)
        count_ += c;
}

std::string escape_label_value(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    for (char c : v) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string escape_help(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    for (char c : v) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string format_value(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    // The shortest text that reads back as the same double: in fixed notation for the magnitudes
    // metrics have ("0.0005", "1795289095.25"), scientific beyond ("1e-09", "1e+20").
    char buf[400];
    double a = std::fabs(v);
    auto fmt = a == 0 || (a >= 1e-6 && a < 1e16) ? std::chars_format::fixed : std::chars_format::scientific;
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, fmt);
    return ec == std::errc() ? std::string(buf, end) : "NaN";
}

std::string format_value(uint64_t v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, end);
}

namespace {

const char* type_name(Type t) {
    switch (t) {
    case Type::counter:
        return "counter";
    case Type::gauge:
        return "gauge";
    case Type::histogram:
        return "histogram";
    }
    return "untyped";
}

}  // namespace

void Writer::fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
}

void Writer::family(const Family& f) {
    std::string name = std::string(kPrefix) + std::string(f.name);
    if (!families_.insert(name).second) {
        fail("family " + name + " started twice");
        current_ = nullptr;
        return;
    }
    current_ = &f;
    out_ += "# HELP " + name + " " + escape_help(f.help) + "\n";
    out_ += "# TYPE " + name + " " + type_name(f.type) + "\n";
}

bool Writer::check(const Family& f, std::initializer_list<std::string_view> values) {
    std::string name = std::string(kPrefix) + std::string(f.name);
    if (current_ != &f) {
        fail("sample of " + name + " outside its family");
        return false;
    }
    if (values.size() != f.n_labels) {
        fail(name + " takes " + std::to_string(f.n_labels) + " label values, got " + std::to_string(values.size()));
        return false;
    }
    return true;
}

void Writer::series(const Family& f, std::string_view suffix, std::initializer_list<std::string_view> values,
                    std::string_view le, std::string_view value) {
    std::string line = std::string(kPrefix) + std::string(f.name) + std::string(suffix);
    std::string labels;
    size_t i = 0;
    for (std::string_view v : values) {
        labels += labels.empty() ? "{" : ",";
        labels += std::string(f.labels[i++]) + "=\"" + escape_label_value(v) + "\"";
    }
    if (!le.empty()) {
        labels += labels.empty() ? "{" : ",";
        labels += "le=\"" + std::string(le) + "\"";
    }
    if (!labels.empty()) labels += "}";
    line += labels;
    if (!series_.insert(line).second) {
        fail("series " + line + " written twice");
        return;
    }
    out_ += line;
    out_ += ' ';
    out_ += value;
    out_ += '\n';
}

void Writer::sample(const Family& f, std::initializer_list<std::string_view> values, uint64_t v) {
    if (f.type == Type::histogram) {
        fail("use histogram() for " + std::string(f.name));
        return;
    }
    if (check(f, values)) series(f, "", values, "", format_value(v));
}

void Writer::sample(const Family& f, std::initializer_list<std::string_view> values, double v) {
    if (f.type == Type::histogram) {
        fail("use histogram() for " + std::string(f.name));
        return;
    }
    if (check(f, values)) series(f, "", values, "", format_value(v));
}

void Writer::histogram(const Family& f, std::initializer_list<std::string_view> values, const Histogram& h) {
    if (f.type != Type::histogram) {
        fail(std::string(f.name) + " is not a histogram");
        return;
    }
    if (!check(f, values)) return;
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds().size(); ++i) {
        cumulative += h.counts()[i];
        series(f, "_bucket", values, format_value(h.bounds()[i]), format_value(cumulative));
    }
    series(f, "_bucket", values, "+Inf", format_value(h.count()));
    series(f, "_sum", values, "", format_value(h.sum()));
    series(f, "_count", values, "", format_value(h.count()));
}

}  // namespace egw::metrics
