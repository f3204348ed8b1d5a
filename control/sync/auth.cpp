// SPDX-License-Identifier: Apache-2.0
#include "control/sync/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

#include "control/sync/wire.h"

namespace egw::sync {

namespace {

std::array<uint8_t, kTagSize> tag_of(const std::vector<uint8_t>& key, std::span<const uint8_t> body) {
    std::array<uint8_t, kTagSize> tag{};
    unsigned len = 0;
    if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), body.data(), body.size(), tag.data(), &len) ||
        len != kTagSize)
        throw std::runtime_error("sync: HMAC-SHA256 failed in libcrypto");
    return tag;
}

bool tag_matches(const std::vector<uint8_t>& key, std::span<const uint8_t> datagram) {
    if (key.empty()) return false;
    auto body = datagram.first(datagram.size() - kTagSize);
    auto expected = tag_of(key, body);
    // Constant time: how much of a forged tag was right must not show in the time taken.
    return CRYPTO_memcmp(expected.data(), datagram.data() + body.size(), kTagSize) == 0;
}

}  // namespace

KeyRing::KeyRing(std::vector<uint8_t> key, std::chrono::milliseconds overlap)
    : current_(std::move(key)), overlap_(overlap) {
    if (current_.size() < kMinKeySize)
        throw std::invalid_argument("sync key: " + std::to_string(current_.size()) + " bytes, expected at least " +
                                    std::to_string(kMinKeySize));
}

bool KeyRing::rotate(std::vector<uint8_t> key, Clock::time_point now) {
    if (key.size() < kMinKeySize)
        throw std::invalid_argument("sync key: " + std::to_string(key.size()) + " bytes, expected at least " +
                                    std::to_string(kMinKeySize));
    if (key == current_) return false;
    previous_ = std::move(current_);
    previous_until_ = now + overlap_;
    current_ = std::move(key);
    ++rotations_;
    return true;
}

void KeyRing::sign(std::span<uint8_t> datagram) const {
    if (datagram.size() < kTagSize) throw std::invalid_argument("sync: datagram shorter than its tag");
    auto tag = tag_of(current_, datagram.first(datagram.size() - kTagSize));
    std::copy(tag.begin(), tag.end(), datagram.end() - kTagSize);
}

KeyRing::Verdict KeyRing::verify(std::span<const uint8_t> datagram, Clock::time_point now) const {
    if (datagram.size() < kTagSize) return Verdict::bad;
    if (tag_matches(current_, datagram)) return Verdict::current;
    if (now < previous_until_ && tag_matches(previous_, datagram)) return Verdict::previous;
    return Verdict::bad;
}

std::vector<uint8_t> read_key_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot read the sync key file");
    std::vector<uint8_t> key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw std::runtime_error(path.string() + ": cannot read the sync key file");
    if (!key.empty() && key.back() == '\n') key.pop_back();
    if (!key.empty() && key.back() == '\r') key.pop_back();
    if (key.size() < kMinKeySize)
        throw std::runtime_error(path.string() + ": the sync key is " + std::to_string(key.size()) +
                                 " bytes, expected at least " + std::to_string(kMinKeySize));
    return key;
}

bool KeyFile::poll(Clock::time_point now) {
    try {
        bool rotated = ring_.rotate(read_key_file(path_), now);
        error_.reset();
        return rotated;
    } catch (const std::exception& e) {
        error_ = e.what();
        return false;
    }
}

}  // namespace egw::sync
