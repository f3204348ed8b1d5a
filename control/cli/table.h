// SPDX-License-Identifier: Apache-2.0
//
// Plain-text tables for `show` output: upper-case headers, columns padded to their widest cell,
// numeric columns aligned right, two spaces between columns, no trailing blanks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace egw::cli {

class Table {
public:
    explicit Table(std::vector<std::string> headers);

    Table& row(std::vector<std::string> cells);
    size_t rows() const { return rows_.size(); }
    std::string render() const;

private:
    std::vector<std::string> headers_;
    std::vector<std::vector<std::string>> rows_;
};

// Thousands are not grouped: columns stay copy-pasteable into scripts.
std::string num(uint64_t v);
// "12.5%" of part/whole, "-" when whole is 0.
std::string percent(uint64_t part, uint64_t whole);

}  // namespace egw::cli
