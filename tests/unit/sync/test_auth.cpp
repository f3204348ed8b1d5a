// SPDX-License-Identifier: Apache-2.0
//
// HMAC-SHA256 of sync datagrams (control/sync/auth.*): a known answer, forgery, key rotation
// with its overlap window, and the key file.
#include "control/sync/auth.h"

#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

#include "control/sync/wire.h"

namespace {

using namespace egw::sync;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::vector<uint8_t> key_of(char c, size_t n = 32) {
    return std::vector<uint8_t>(n, static_cast<uint8_t>(c));
}

std::vector<uint8_t> datagram() {
    Datagram d;
    d.header.sender = 7;
    d.header.counter = 99;
    d.events.resize(1);
    d.events[0].inside.addr = ipv4_address(1);
    d.events[0].outside.addr = ipv4_address(2);
    d.events[0].remote.addr = ipv4_address(3);
    return encode(d);
}

TEST(SyncAuth, TagIsHmacSha256OverTheBytesBeforeIt) {
    // A known answer from another implementation (Python's hmac module): key 0x0b x 32 (KeyRing
    // refuses keys shorter than 32 bytes) over "Hi There".
    std::string body = "Hi There";
    std::vector<uint8_t> buf(body.begin(), body.end());
    buf.resize(buf.size() + kTagSize);
    KeyRing ring(std::vector<uint8_t>(32, 0x0b));
    ring.sign(buf);
    const uint8_t expected[kTagSize] = {0x19, 0x8a, 0x60, 0x7e, 0xb4, 0x4b, 0xfb, 0xc6, 0x99, 0x03, 0xa0,
                                        0xf1, 0xcf, 0x2b, 0xbd, 0xc5, 0xba, 0x0a, 0xa3, 0xf3, 0xd9, 0xae,
                                        0x3c, 0x1c, 0x7a, 0x3b, 0x16, 0x96, 0xa0, 0xb6, 0x8c, 0xf7};
    EXPECT_EQ(std::vector<uint8_t>(buf.end() - kTagSize, buf.end()),
              std::vector<uint8_t>(std::begin(expected), std::end(expected)));
}

TEST(SyncAuth, ForgedOrAlteredDatagramsFail) {
    auto now = Clock::time_point{} + 1h;
    KeyRing ring(key_of('a'));
    auto b = datagram();
    ring.sign(b);
    EXPECT_EQ(ring.verify(b, now), KeyRing::Verdict::current);
    for (size_t i = 0; i < b.size(); i += 7) {
        auto altered = b;
        altered[i] ^= 0x01;
        EXPECT_EQ(ring.verify(altered, now), KeyRing::Verdict::bad) << "byte " << i;
    }
    KeyRing other(key_of('b'));
    auto forged = datagram();
    other.sign(forged);
    EXPECT_EQ(ring.verify(forged, now), KeyRing::Verdict::bad);
    EXPECT_EQ(ring.verify(std::vector<uint8_t>(5), now), KeyRing::Verdict::bad);
}

TEST(SyncAuth, RotationAcceptsThePreviousKeyOnlyDuringTheOverlap) {
    auto t0 = Clock::time_point{} + 1h;
    KeyRing ring(key_of('a'), 10s);
    KeyRing old_peer(key_of('a'));
    auto from_old = datagram();
    old_peer.sign(from_old);

    EXPECT_TRUE(ring.rotate(key_of('b'), t0));
    EXPECT_FALSE(ring.rotate(key_of('b'), t0 + 1s)) << "the same key again is no rotation";
    EXPECT_EQ(ring.rotations(), 1u);
    EXPECT_EQ(ring.verify(from_old, t0 + 9s), KeyRing::Verdict::previous);
    EXPECT_EQ(ring.verify(from_old, t0 + 10s), KeyRing::Verdict::bad);

    auto signed_now = datagram();
    ring.sign(signed_now);
    KeyRing new_peer(key_of('b'));
    EXPECT_EQ(new_peer.verify(signed_now, t0), KeyRing::Verdict::current) << "signs with the new key";

    // Two rotations in a row: the oldest key is forgotten at once.
    ring.rotate(key_of('c'), t0 + 1s);
    EXPECT_EQ(ring.verify(from_old, t0 + 2s), KeyRing::Verdict::bad);
}

TEST(SyncAuth, ShortKeysAreRefused) {
    EXPECT_THROW(KeyRing(key_of('a', 31)), std::invalid_argument);
    KeyRing ring(key_of('a'));
    EXPECT_THROW(ring.rotate(key_of('b', 16), Clock::time_point{}), std::invalid_argument);
}

class KeyFileTest : public ::testing::Test {
protected:
    void SetUp() override { path_ = fs::temp_directory_path() / ("egw-sync-key-" + std::to_string(getpid())); }
    void TearDown() override { fs::remove(path_); }
    void write(const std::string& s) { std::ofstream(path_, std::ios::binary) << s; }
    fs::path path_;
};

TEST_F(KeyFileTest, ReadsTheKeyWithoutItsNewlineAndNamesTheFileInErrors) {
    std::string k(40, 'k');
    write(k + "\n");
    auto key = read_key_file(path_);
    EXPECT_EQ(std::string(key.begin(), key.end()), k);

    write("short\n");
    try {
        read_key_file(path_);
        FAIL() << "a 5-byte key was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), path_.string() + ": the sync key is 5 bytes, expected at least 32");
    }
    fs::remove(path_);
    EXPECT_THROW(read_key_file(path_), std::runtime_error);
}

TEST_F(KeyFileTest, RotatesWithoutRestartAndKeepsTheKeyWhenTheFileGoesBad) {
    auto now = Clock::time_point{} + 1h;
    write(std::string(32, 'a'));
    KeyRing ring(read_key_file(path_));
    KeyFile file(path_, ring);
    EXPECT_FALSE(file.poll(now)) << "unchanged";

    write(std::string(32, 'b'));
    EXPECT_TRUE(file.poll(now));
    EXPECT_FALSE(file.error());
    auto b = datagram();
    ring.sign(b);
    EXPECT_EQ(KeyRing(key_of('b')).verify(b, now), KeyRing::Verdict::current);

    write("half-writ");
    EXPECT_FALSE(file.poll(now + 1s));
    ASSERT_TRUE(file.error());
    EXPECT_NE(file.error()->find("expected at least 32"), std::string::npos);
    auto c = datagram();
    ring.sign(c);
    EXPECT_EQ(KeyRing(key_of('b')).verify(c, now), KeyRing::Verdict::current) << "the key in force stays";

    write(std::string(32, 'b'));
    EXPECT_FALSE(file.poll(now + 2s));
    EXPECT_FALSE(file.error()) << "fixed";
}

}  // namespace
