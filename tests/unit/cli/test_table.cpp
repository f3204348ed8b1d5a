// SPDX-License-Identifier: Apache-2.0
//
// Plain-text tables (control/cli/table.h).
#include <gtest/gtest.h>

#include "control/cli/table.h"

using namespace egw::cli;

TEST(Table, UpperCaseHeadersAlignedColumns) {
    Table t({"port", "ip", "rx-packets", "busy"});
    t.row({"ext1", "192.0.2.100", "12", "0.5%"}).row({"pods", "10.244.1.1", "1234567", "-"});
    EXPECT_EQ(t.render(),
              "PORT  IP           RX-PACKETS  BUSY\n"
              "ext1  192.0.2.100          12  0.5%\n"
              "pods  10.244.1.1      1234567     -\n");
    EXPECT_EQ(t.rows(), 2u);
}

TEST(Table, ShortRowsArePaddedAndNoTrailingBlanks) {
    Table t({"name", "note"});
    t.row({"a"}).row({"bbbb", "x"});
    EXPECT_EQ(t.render(), "NAME  NOTE\na\nbbbb  x\n");
}

TEST(Table, EmptyTableIsItsHeader) {
    EXPECT_EQ(Table({"a", "bb"}).render(), "A  BB\n");
}

TEST(Table, Numbers) {
    EXPECT_EQ(num(0), "0");
    EXPECT_EQ(num(18446744073709551615ull), "18446744073709551615");
    EXPECT_EQ(percent(1, 8), "12.5%");
    EXPECT_EQ(percent(0, 0), "-");
}
