// SPDX-License-Identifier: Apache-2.0
#include "control/cli/table.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace egw::cli {

namespace {

// A count, a decimal or a percentage: "12", "0.5", "12.5%". Addresses ("10.0.0.1") are text.
bool numeric(const std::string& s) {
    if (s.empty() || s == "-") return true;  // a placeholder does not make a column textual
    size_t i = 0, digits = 0, dots = 0;
    for (; i < s.size(); ++i) {
        if (std::isdigit(static_cast<unsigned char>(s[i])))
            ++digits;
        else if (s[i] == '.' && ++dots == 1)
            continue;
        else
            break;
    }
    if (i < s.size() && s[i] == '%') ++i;
    return digits > 0 && i == s.size();
}

}  // namespace

Table::Table(std::vector<std::string> headers) : headers_(std::move(headers)) {
    for (auto& h : headers_)
        std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return std::toupper(c); });
}

Table& Table::row(std::vector<std::string> cells) {
    cells.resize(headers_.size());
    rows_.push_back(std::move(cells));
    return *this;
}

std::string Table::render() const {
    size_t n = headers_.size();
    std::vector<size_t> width(n);
    std::vector<bool> right(n, !rows_.empty());
    for (size_t c = 0; c < n; ++c) {
        width[c] = headers_[c].size();
        for (const auto& r : rows_) {
            width[c] = std::max(width[c], r[c].size());
            if (!numeric(r[c])) right[c] = false;
        }
    }
    std::string out;
    auto line = [&](const std::vector<std::string>& cells) {
        std::string l;
        for (size_t c = 0; c < n; ++c) {
            std::string pad(width[c] - cells[c].size(), ' ');
            if (c) l += "  ";
            l += right[c] ? pad + cells[c] : cells[c] + (c + 1 < n ? pad : "");
        }
        while (!l.empty() && l.back() == ' ')
            l.pop_back();
        out += l + "\n";
    };
    line(headers_);
    for (const auto& r : rows_)
        line(r);
    return out;
}

std::string num(uint64_t v) {
    return std::to_string(v);
}

std::string percent(uint64_t part, uint64_t whole) {
    if (whole == 0) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
    return buf;
}

}  // namespace egw::cli
