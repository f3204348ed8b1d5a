// SPDX-License-Identifier: Apache-2.0
//
// Test packets: builders for Ethernet/IPv4/TCP/UDP/ICMP frames with correct checksums, and a
// parser that checks every checksum of a frame by full recomputation.
//
// Deliberately independent of dataplane/checksum.h and of the DPDK header structs: the bytes are
// laid out by hand here, so a mistake shared by the data plane and its helpers cannot hide.
// Addresses are host byte order everywhere in this API; ports and identifiers too.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace egw::test {

using Bytes = std::vector<uint8_t>;
using Mac = std::array<uint8_t, 6>;

constexpr uint32_t ip4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return a << 24 | b << 16 | c << 8 | d;
}
std::string ip_str(uint32_t host_order);
std::string mac_str(const Mac& m);

inline constexpr uint8_t kProtoIcmp = 1;
inline constexpr uint8_t kProtoTcp = 6;
inline constexpr uint8_t kProtoUdp = 17;
inline constexpr uint16_t kEtherIpv4 = 0x0800;
inline constexpr uint16_t kEtherArp = 0x0806;
inline constexpr uint16_t kEtherIpv6 = 0x86dd;

inline constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10;

// Big-endian field access.
void put16(uint8_t* p, uint16_t v);
void put32(uint8_t* p, uint32_t v);
uint16_t get16(const uint8_t* p);
uint32_t get32(const uint8_t* p);

// RFC 1071 sum of 16-bit big-endian words (odd length padded with zero), not folded.
uint32_t sum16(const uint8_t* data, size_t len, uint32_t sum = 0);
// ~fold(sum): the value a checksum field must hold.
uint16_t finish(uint32_t sum);
uint32_t pseudo_sum(uint32_t src, uint32_t dst, uint8_t proto, uint32_t l4_len);

struct IpOpt {
    uint8_t ttl = 64;
    uint16_t id = 0x4242;
    uint16_t frag = 0;  // flags and fragment offset word, host order (0x2000: MF, 0x4000: DF)
    uint8_t tos = 0;
    Bytes options;  // IPv4 options, a multiple of 4 bytes
};

// L4 messages. TCP and UDP checksums are computed over the pseudo-header of (src, dst).
Bytes tcp_segment(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, uint8_t flags, const Bytes& payload = {},
                  uint32_t seq = 1000, uint32_t ack = 0);
// `zero_checksum`: send "no checksum" (0). A computed 0 is sent as 0xFFFF (RFC 768).
Bytes udp_datagram(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, const Bytes& payload = {},
                   bool zero_checksum = false);
Bytes icmp_echo(bool request, uint16_t ident, uint16_t seq, const Bytes& payload = {});
// An ICMP error (type 3, 4, 11, 12) quoting `quoted` (an IPv4 datagram or its start).
Bytes icmp_error(uint8_t type, uint8_t code, const Bytes& quoted, uint32_t rest_of_header = 0);

// An IPv4 datagram carrying `l4`, header checksum filled in.
Bytes ipv4(uint32_t src, uint32_t dst, uint8_t proto, const Bytes& l4, const IpOpt& o = {});
Bytes ethernet(const Mac& dst, const Mac& src, uint16_t ether_type, const Bytes& payload);

// Shorthands: whole IPv4 datagrams.
Bytes tcp_ip(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, uint8_t flags, const Bytes& payload = {},
             const IpOpt& o = {});
Bytes udp_ip(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, const Bytes& payload = {}, const IpOpt& o = {},
             bool zero_checksum = false);
Bytes echo_ip(bool request, uint32_t src, uint32_t dst, uint16_t ident, uint16_t seq = 1, const Bytes& payload = {},
              const IpOpt& o = {});

// IPv4 fragments, made and put together by hand (RFC 791), independent of rte_ip_frag.
// fragments(): the datagram cut at `payload_per_fragment` bytes of its payload (a multiple of 8,
// except for the last piece); every fragment carries the whole header, with its own checksum.
std::vector<Bytes> fragments(const Bytes& datagram, size_t payload_per_fragment);
// One fragment of a datagram: `len` payload bytes at `offset`, MF as given.
Bytes fragment_of(const Bytes& datagram, size_t offset, size_t len, bool more);
// The datagram the fragments make (any order), with the first fragment's header, total length
// and checksum recomputed and flags cleared; empty when they do not cover it exactly once or a
// fragment's header checksum is wrong (`why` says which).
Bytes reassemble(const std::vector<Bytes>& fragments, std::string* why = nullptr);

// IPv6. Addresses as on the wire (16 bytes); ip6("2001:db8::1") parses text (a bad literal fails
// the test and gives ::).
using Ip6Addr = std::array<uint8_t, 16>;
Ip6Addr ip6(const char* text);
std::string ip6_str(const Ip6Addr& a);
inline constexpr uint8_t kProtoIcmp6 = 58;
uint32_t pseudo_sum6(const Ip6Addr& src, const Ip6Addr& dst, uint8_t proto, uint32_t l4_len);

struct Ip6Opt {
    uint8_t hop_limit = 64;
    // Extension headers in order: (type, bytes after the next-header and length bytes). The builder
    // fills both bytes in (length for a Fragment header: reserved, 0); the data must make each
    // header a multiple of 8 bytes.
    std::vector<std::pair<uint8_t, Bytes>> ext;
    uint8_t traffic_class = 0;
};

// An IPv6 packet carrying `l4` as protocol `proto` behind the extension headers of `o`.
Bytes ipv6(const Ip6Addr& src, const Ip6Addr& dst, uint8_t proto, const Bytes& l4, const Ip6Opt& o = {});
Bytes tcp6_ip(const Ip6Addr& src, uint16_t sport, const Ip6Addr& dst, uint16_t dport, uint8_t flags,
              const Bytes& payload = {}, const Ip6Opt& o = {});
Bytes udp6_ip(const Ip6Addr& src, uint16_t sport, const Ip6Addr& dst, uint16_t dport, const Bytes& payload = {},
              const Ip6Opt& o = {}, bool zero_checksum = false);
// An ICMPv6 message of `type` and `code` whose bytes from offset 4 on are `body`, checksum filled in.
Bytes icmp6_ip(const Ip6Addr& src, const Ip6Addr& dst, uint8_t type, uint8_t code, const Bytes& body,
               const Ip6Opt& o = {});
Bytes echo6_ip(bool request, const Ip6Addr& src, const Ip6Addr& dst, uint16_t ident, uint16_t seq = 1,
               const Bytes& payload = {}, const Ip6Opt& o = {});
// One kind of IPv6 flow a pod starts, and the remote's answer, as builders of (source, source
// port, destination, destination port, hop limit): a TCP SYN answered by a SYN-ACK, a UDP
// request and its answer (both with `request`/`response` as payload), an ICMPv6 echo request and
// its reply (the identifier plays the pod's port: "source port" out, "destination port" back;
// sequence 7, `request` as data). test_nat66.cpp takes every kind through every policy; the
// packet fuzz target primes its IPv6 sessions with them.
struct Flow6 {
    std::string name;
    uint8_t proto;
    std::function<Bytes(const Ip6Addr&, uint16_t, const Ip6Addr&, uint16_t, uint8_t)> out, back;
};
std::vector<Flow6> flows6();

// Neighbor Solicitation for `target` with a source link-layer address option of `sll` (none when
// `src` is :: as in duplicate address detection).
Bytes ns6_ip(const Ip6Addr& src, const Ip6Addr& dst, const Ip6Addr& target, const Mac& sll, const Ip6Opt& o = {255});
// The solicited-node multicast address of `a` (ff02::1:ffXX:XXXX) and its Ethernet address.
Ip6Addr solicited_node(const Ip6Addr& a);
Mac multicast_mac(const Ip6Addr& group);
// The link-local address a port with MAC `m` has: fe80::/64 and the modified EUI-64 of `m`.
Ip6Addr link_local_of(const Mac& m);

// IPv6 fragments (RFC 8200 4.5), made and put together by hand, independent of rte_ip_frag. The
// packet's fixed header is its unfragmentable part; everything after it (extension headers
// included) is cut. fragments6(): cut at `payload_per_fragment` bytes (a multiple of 8, except
// for the last piece), each fragment the fixed header and a Fragment header of `id`.
std::vector<Bytes> fragments6(const Bytes& packet, size_t payload_per_fragment, uint32_t id);
// One fragment of a packet: `len` bytes of its fragmentable part at `offset`, M as given.
Bytes fragment6_of(const Bytes& packet, size_t offset, size_t len, bool more, uint32_t id);
// The packet the fragments make (any order): the first fragment's fixed header with the Fragment
// header's next header and the payload length of the whole; empty when they do not cover it
// exactly once, are not each a fixed header and a Fragment header, or do not share one
// identification (`why` says which). `id`, when given, gets that identification.
Bytes reassemble6(const std::vector<Bytes>& fragments, std::string* why = nullptr, uint32_t* id = nullptr);

// ARP (Ethernet/IPv4) body.
Bytes arp_body(uint16_t op, const Mac& sha, uint32_t spa, const Mac& tha, uint32_t tpa);

// A parsed frame. Every *_ok flag is the result of a full recomputation: the stored checksum must
// equal exactly the value a sender computes (UDP: 0 means "none"; a computed 0 must be 0xFFFF).
struct Parsed {
    bool ok = false;  // the frame parsed as far as its headers claim
    std::string error;

    Mac eth_dst{}, eth_src{};
    uint16_t ether_type = 0;

    // IPv4
    uint8_t ihl = 0, tos = 0, ttl = 0, proto = 0;
    uint16_t total_length = 0, id = 0, frag = 0, ip_csum = 0;
    uint32_t src = 0, dst = 0;
    bool ip_csum_ok = false;
    Bytes l3;  // the IPv4 datagram as it is in the frame

    // L4
    bool l4_complete = false;       // the whole L4 message is present (always true outside quotes)
    uint16_t sport = 0, dport = 0;  // TCP/UDP
    uint8_t tcp_flags = 0;
    uint32_t seq = 0, ack = 0;
    uint8_t icmp_type = 0, icmp_code = 0;
    uint16_t icmp_ident = 0, icmp_seq = 0;
    uint16_t l4_csum = 0;     // TCP, UDP or ICMP checksum field
    bool l4_csum_ok = false;  // false when not complete
    Bytes payload;            // after the TCP/UDP/ICMP header (ICMP errors: the quote)

    std::shared_ptr<Parsed> inner;  // ICMP errors: the quoted datagram

    // IPv6 (proto is the transport protocol after any extension headers; l3 the whole packet)
    Ip6Addr src6{}, dst6{};
    uint8_t hop_limit = 0;
    uint16_t payload_length = 0;
    // A Fragment header with an offset or more to come (not an atomic one): a later fragment
    // (fragment_offset above 0) is parsed no further, its bytes in `payload`; a first one's
    // transport header as far as it goes (l4_complete false, its checksum not judged).
    bool fragment = false;
    uint16_t fragment_offset = 0;

    // ARP
    uint16_t arp_htype = 0, arp_ptype = 0, arp_op = 0;
    uint8_t arp_hlen = 0, arp_plen = 0;
    Mac arp_sha{}, arp_tha{};
    uint32_t arp_spa = 0, arp_tpa = 0;
};

Parsed parse_frame(const Bytes& frame);
// `quoted`: the datagram is quoted inside an ICMP error and may be cut short.
Parsed parse_ipv4(const uint8_t* data, size_t len, bool quoted = false);
Parsed parse_ipv6(const uint8_t* data, size_t len, bool quoted = false);

// Every checksum of the frame (and of a quoted datagram, as far as it is present) is exactly
// what a full recomputation gives.
::testing::AssertionResult checksums_valid(const Parsed& p);

}  // namespace egw::test
