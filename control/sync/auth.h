// SPDX-License-Identifier: Apache-2.0
//
// Authentication of sync datagrams: HMAC-SHA256 (OpenSSL's libcrypto) over everything before the
// tag. Sync installs NAT state on its peers, so nobody who merely reaches the sync network may
// send it: the key is shared by the gateways only, and can be rotated without a restart. After a
// rotation the previous key is still accepted for an overlap window, because the peers read the
// new key at different moments (docs/operations.md, "Session sync: the key").
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace egw::sync {

using Clock = std::chrono::steady_clock;

inline constexpr size_t kMinKeySize = 32;  // as long as the SHA-256 output: no weaker than the tag

class KeyRing {
public:
    explicit KeyRing(std::vector<uint8_t> key, std::chrono::milliseconds overlap = std::chrono::seconds(60));

    // Makes `key` the one that signs; the one it replaces is still accepted until now + overlap.
    // Installing the current key again changes nothing (and returns false).
    bool rotate(std::vector<uint8_t> key, Clock::time_point now);

    // Writes the tag into the last kTagSize bytes of `datagram`, over the bytes before them.
    void sign(std::span<uint8_t> datagram) const;

    enum class Verdict : uint8_t { current, previous, bad };
    Verdict verify(std::span<const uint8_t> datagram, Clock::time_point now) const;

    uint64_t rotations() const { return rotations_; }

private:
    std::vector<uint8_t> current_, previous_;
    Clock::time_point previous_until_{};
    std::chrono::milliseconds overlap_;
    uint64_t rotations_ = 0;
};

// The key file: its bytes are the key (a trailing newline is not part of it), at least
// kMinKeySize of them. Throws std::runtime_error naming the file and what is wrong.
std::vector<uint8_t> read_key_file(const std::filesystem::path& path);

// Follows a key file for rotation without restart: poll() reads it again and rotates the ring
// when the key changed. A file that cannot be read or holds a short key keeps the key in force
// and is reported once (error() until it is fixed), so a half-written file never stops sync.
class KeyFile {
public:
    KeyFile(std::filesystem::path path, KeyRing& ring) : path_(std::move(path)), ring_(ring) {}
    // True when the ring was rotated.
    bool poll(Clock::time_point now);
    const std::optional<std::string>& error() const { return error_; }

private:
    std::filesystem::path path_;
    KeyRing& ring_;
    std::optional<std::string> error_;
};

}  // namespace egw::sync
