// SPDX-License-Identifier: Apache-2.0
//
// Internet checksum arithmetic for translating headers in place.
//
// Every helper works on 16-bit words exactly as they sit in the packet (network byte order read
// as a native uint16_t). The one's complement sum is byte-order independent, so no swapping is
// needed as long as old and new values are taken the same way.
//
// Incremental update follows RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'). Unlike eqn. 2 of RFC 1141
// it never produces 0xFFFF... as a stand-in for 0x0000 where a full recomputation would not.
#pragma once

#include <cstdint>

namespace egw::dp {

inline uint16_t csum_fold(uint32_t sum) {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(sum);
}

// The one's complement "difference" of replacing `old` by `now`, to be applied with
// csum_apply(). Precomputed once per session so the per-packet cost is one add and a fold.
inline uint32_t csum_delta16(uint16_t old_word, uint16_t new_word) {
    return static_cast<uint16_t>(~old_word) + uint32_t{new_word};
}

inline uint32_t csum_delta32(uint32_t old_value, uint32_t new_value) {
    uint32_t inv = ~old_value;
    return (inv & 0xffff) + (inv >> 16) + (new_value & 0xffff) + (new_value >> 16);
}

// A folded delta, so deltas can be stored in 16 bits and combined.
inline uint16_t csum_delta_fold(uint32_t delta) {
    return csum_fold(delta);
}

// The delta that undoes `delta` (replacing m' by m again).
inline uint16_t csum_delta_invert(uint16_t delta) {
    return static_cast<uint16_t>(~delta);
}

// One's complement addition of two 16-bit words: the carry out of the top comes back in at the
// bottom (an add and an add-with-carry, where folding a 32-bit sum takes six instructions).
inline uint16_t csum_add(uint16_t a, uint16_t b) {
    uint16_t sum;
    bool carry = __builtin_add_overflow(a, b, &sum);
    return static_cast<uint16_t>(sum + carry);
}

// `delta` as two 16-bit words, which is the same one's complement value as its fold: a delta that
// is one 16-bit word (the sessions' folded ones) costs one csum_add.
inline uint16_t csum_apply(uint16_t checksum, uint32_t delta) {
    uint16_t sum = csum_add(static_cast<uint16_t>(~checksum), static_cast<uint16_t>(delta));
    return static_cast<uint16_t>(~csum_add(sum, static_cast<uint16_t>(delta >> 16)));
}

// Two 16-bit deltas at once (a translation and the TTL's).
inline uint16_t csum_apply(uint16_t checksum, uint16_t delta, uint16_t more) {
    return static_cast<uint16_t>(~csum_add(csum_add(static_cast<uint16_t>(~checksum), delta), more));
}

// UDP: a transmitted checksum of zero means "none" and must stay zero (RFC 768); a computed
// zero is sent as 0xFFFF.
inline uint16_t csum_apply_udp(uint16_t checksum, uint32_t delta) {
    if (checksum == 0) return 0;
    uint16_t out = csum_apply(checksum, delta);
    return out == 0 ? 0xffff : out;
}

// ICMP: no pseudo-header covers it, so a message can be all zeros (an echo reply with
// identifier 0, sequence 0 and no data), whose only valid checksum is 0xFFFF; eqn. 3 gives
// 0x0000 there. 0xFFFF verifies wherever 0x0000 does, so a computed zero is sent as 0xFFFF.
inline uint16_t csum_apply_icmp(uint16_t checksum, uint32_t delta) {
    uint16_t out = csum_apply(checksum, delta);
    return out == 0 ? 0xffff : out;
}

// Plain one's complement sum of a buffer (used where a full recomputation is cheap enough:
// ICMP error messages, and the tests that check the incremental helpers).
inline uint32_t csum_partial(const void* data, uint32_t len, uint32_t sum = 0) {
    auto p = static_cast<const uint8_t*>(data);
    while (len >= 2) {
        uint16_t w;
        __builtin_memcpy(&w, p, 2);
        sum += w;
        p += 2;
        len -= 2;
    }
    if (len) {
        uint16_t w = 0;
        __builtin_memcpy(&w, p, 1);
        sum += w;
    }
    return sum;
}

inline uint16_t csum_finish(uint32_t sum) {
    return static_cast<uint16_t>(~csum_fold(sum));
}

}  // namespace egw::dp
