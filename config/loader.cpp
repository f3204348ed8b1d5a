// SPDX-License-Identifier: Apache-2.0
//
// The strict loader of egwd's JSON configuration (see config.h and docs/configuration.md).
//
// Every problem is reported as one ConfigError "<file>: <json path>: expected ..., got ...". The
// loader walks the document section by section, in a fixed order, and stops at the first error.
// Nothing is returned until the whole file has been read and every cross reference checked, so a
// caller either gets a complete Config or an exception.
#include "config/config.h"

#include <arpa/inet.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

namespace egw::config {

ConfigError::ConfigError(const std::string& file, const std::string& path, const std::string& expected)
    : std::runtime_error(file + ": " + path + ": " + expected), file_(file), path_(path) {}

// ---------------------------------------------------------------------------------------------
// Address helpers
// ---------------------------------------------------------------------------------------------

namespace {

// A decimal number of at most `max_digits` digits, no sign, no leading zero (except "0" itself).
bool parse_decimal(std::string_view s, size_t max_digits, uint64_t max_value, uint64_t& out) {
    if (s.empty() || s.size() > max_digits) return false;
    if (s.size() > 1 && s[0] == '0') return false;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (v > max_value) return false;
    out = v;
    return true;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::optional<uint32_t> parse_ipv4(const std::string& s) {
    auto a = net::parse_ip(s);
    if (!a || !a->is_v4()) return std::nullopt;
    return a->v4();
}

std::optional<MacAddr> parse_mac(const std::string& s) {
    if (s.size() != 17) return std::nullopt;
    MacAddr m;
    for (size_t i = 0; i < 6; ++i) {
        int hi = hex_value(s[3 * i]);
        int lo = hex_value(s[3 * i + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        if (i < 5 && s[3 * i + 2] != ':') return std::nullopt;
        m.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
    }
    return m;
}

std::string format_ipv4(uint32_t ip) {
    return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xff) + "." + std::to_string((ip >> 8) & 0xff) +
           "." + std::to_string(ip & 0xff);
}

std::string format_host_port(const std::string& host, uint16_t port) {
    bool v6 = host.find(':') != std::string::npos;
    return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string format_listen(const MetricsConfig& m) {
    return format_host_port(m.host, m.port);
}

std::string format_mac(const MacAddr& m) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(17);
    for (size_t i = 0; i < 6; ++i) {
        if (i) out += ':';
        out += digits[m.bytes[i] >> 4];
        out += digits[m.bytes[i] & 0xf];
    }
    return out;
}

const char* to_string(PortRole r) {
    switch (r) {
    case PortRole::inside:
        return "inside";
    case PortRole::outside:
        return "outside";
    case PortRole::none:
        return "none";
    }
    return "?";
}

const char* to_string(DefaultAction a) {
    switch (a) {
    case DefaultAction::route:
        return "route";
    case DefaultAction::masquerade:
        return "masquerade";
    case DefaultAction::drop:
        return "drop";
    }
    return "?";
}

const char* to_string(TcpOpen t) {
    return t == TcpOpen::strict ? "strict" : "loose";
}

const char* to_string(StateSource s) {
    switch (s) {
    case StateSource::files:
        return "files";
    case StateSource::kubernetes:
        return "kubernetes";
    }
    return "?";
}

const char* to_string(Election e) {
    switch (e) {
    case Election::leader:
        return "leader";
    case Election::external:
        return "external";
    }
    return "?";
}

const PortConfig* Config::find_port(const std::string& name) const {
    for (const auto& p : ports)
        if (p.name == name) return &p;
    return nullptr;
}

const VrfConfig* Config::find_vrf(const std::string& name_or_table) const {
    for (const auto& v : vrfs)
        if (v.name == name_or_table) return &v;
    uint64_t table = 0;
    if (!parse_decimal(name_or_table, 10, std::numeric_limits<uint32_t>::max(), table)) return nullptr;
    for (const auto& v : vrfs)
        if (v.table == table) return &v;
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// The loader
// ---------------------------------------------------------------------------------------------

namespace {

using json = nlohmann::json;

// Debian's DPDK 22.11 is built with RTE_MAX_LCORE 128: lcore ids are 0..127.
constexpr uint64_t kMaxLcore = 127;
// rte_config.h: RTE_MEMPOOL_CACHE_MAX_SIZE and RTE_PKTMBUF_HEADROOM.
constexpr uint64_t kMempoolCacheMax = 512;
constexpr uint64_t kMbufHeadroom = 128;
// The input stage pulls the first 590 bytes of a chained frame (its Ethernet header and 576 bytes,
// dataplane/input.cpp kContiguous) into its first mbuf; a smaller buffer would drop every chained
// frame (a jumbo frame received in pieces, a reassembled datagram) as malformed.
constexpr uint64_t kMbufFirstSegment = 14 + 576;
constexpr uint32_t kDefaultTable = 254;
constexpr const char* kDefaultVrf = "default";

bool is_identifier(std::string_view k) {
    if (k.empty()) return false;
    if (!(std::isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_')) return false;
    return std::all_of(k.begin(), k.end(),
                       [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string quote(std::string_view s) {
    return json(std::string(s)).dump(-1, ' ', true, json::error_handler_t::replace);
}

// `$.a.b` for identifier keys, `$.a["k/x"]` for any other key.
std::string key_path(const std::string& base, std::string_view k) {
    if (is_identifier(k)) return base + "." + std::string(k);
    return base + "[" + quote(k) + "]";
}

std::string index_path(const std::string& base, size_t i) {
    return base + "[" + std::to_string(i) + "]";
}

// What a value is, for the "got ..." half of a message.
std::string describe(const json& j) {
    switch (j.type()) {
    case json::value_t::object:
        return j.empty() ? "an empty object" : "an object";
    case json::value_t::array:
        return j.empty() ? "an empty array" : "an array";
    case json::value_t::null:
        return "null";
    case json::value_t::string: {
        const auto& s = j.get_ref<const std::string&>();
        constexpr size_t kMax = 64;
        if (s.size() <= kMax) return quote(s);
        size_t cut = kMax;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80)
            --cut;  // UTF-8 boundary
        return quote(s.substr(0, cut)) + "...";
    }
    default:
        return j.dump();
    }
}

std::string join(std::initializer_list<std::string_view> items) {
    std::string out;
    for (auto it : items) {
        if (!out.empty()) out += ", ";
        out += it;
    }
    return out;
}

bool valid_dns_label(std::string_view s, size_t max) {
    if (s.empty() || s.size() > max) return false;
    auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    if (!alnum(s.front()) || !alnum(s.back())) return false;
    return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-'; });
}

// DNS-1123 subdomain: dot-separated DNS labels, 253 characters at most.
bool valid_dns_subdomain(std::string_view s) {
    if (s.empty() || s.size() > 253) return false;
    while (true) {
        size_t dot = s.find('.');
        if (!valid_dns_label(s.substr(0, dot), 63)) return false;
        if (dot == std::string_view::npos) return true;
        s = s.substr(dot + 1);
    }
}

// Kubernetes label name part / value: at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends.
bool valid_label_name(std::string_view s, bool allow_empty) {
    if (s.empty()) return allow_empty;
    if (s.size() > 63) return false;
    auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
    if (!alnum(s.front()) || !alnum(s.back())) return false;
    return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

bool valid_label_key(std::string_view s) {
    size_t slash = s.find('/');
    if (slash == std::string_view::npos) return valid_label_name(s, false);
    return valid_dns_subdomain(s.substr(0, slash)) && valid_label_name(s.substr(slash + 1), false);
}

// Port names: the CLI and the rest of the file refer to them.
bool valid_port_name(std::string_view s) {
    if (s.empty() || s.size() > 32) return false;
    if (!std::isalnum(static_cast<unsigned char>(s[0]))) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    });
}

// VRF names: printable, no space or '/', not a bare number (numbers name tables in find_vrf).
enum class VrfNameProblem { none, empty, bad_char, too_long, numeric };
VrfNameProblem check_vrf_name(std::string_view s) {
    if (s.empty()) return VrfNameProblem::empty;
    if (s.size() > 63) return VrfNameProblem::too_long;
    for (char c : s)
        if (c <= ' ' || c == '/' || c == 0x7f) return VrfNameProblem::bad_char;
    if (std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return VrfNameProblem::numeric;
    return VrfNameProblem::none;
}

bool valid_file_prefix(std::string_view s) {
    if (s.empty() || s.size() > 64) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    });
}

// "[dddd:]bb:dd.f" -> "dddd:bb:dd.f" in lower case, or nullopt. `s` is only the address, no devargs.
std::optional<std::string> normalize_pci(std::string_view s) {
    std::string full(s);
    if (full.size() == 7) full = "0000:" + full;
    if (full.size() != 12) return std::nullopt;
    // dddd:bb:dd.f
    static constexpr const char* shape = "hhhh:hh:hh.h";
    for (size_t i = 0; i < 12; ++i) {
        if (shape[i] == 'h') {
            if (hex_value(full[i]) < 0) return std::nullopt;
            full[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(full[i])));
        } else if (full[i] != shape[i]) {
            return std::nullopt;
        }
    }
    if (hex_value(full[8]) * 16 + hex_value(full[9]) > 0x1f) return std::nullopt;  // device 0..1f
    if (hex_value(full[11]) > 7) return std::nullopt;                              // function 0..7
    return full;
}

// eal.lcores as EAL takes it. `simple`: a plain list of ids and ranges ("0-3", "0,2,4", "0-1,4"),
// passed with -l. `mapped`: EAL's --lcores form, a comma-separated list of LCORES[@CPUS] where
// each side is an id, a range "a-b" or a parenthesised list of them ("0@0,(1-2)@(4-5)", "1-3",
// "4@(2,6)"). `set` holds the lcore ids either way, so the main lcore and the workers are checked
// against it. What EAL would refuse is `invalid`: a lone or unbalanced bracket, an empty item or
// side, a reversed range, an lcore id above kMaxLcore (EAL's RTE_MAX_LCORE), a CPU id above
// kMaxCpu (CPU_SETSIZE - 1). Whether those CPUs exist on this machine EAL checks at start.
struct LcoreSpec {
    enum Kind { simple, mapped, invalid } kind = invalid;
    std::set<unsigned> set;
};

constexpr uint64_t kMaxCpu = 1023;

// One side of an item: "3", "1-2" or "(1-2,5)". Adds the ids to `out`; false when malformed.
bool parse_lcore_side(std::string_view s, uint64_t max, std::set<unsigned>& out) {
    if (s.size() >= 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
    if (s.empty() || s.find_first_of("()@") != std::string_view::npos) return false;
    while (true) {
        size_t comma = s.find(',');
        std::string_view item = s.substr(0, comma);
        size_t dash = item.find('-');
        uint64_t lo = 0, hi = 0;
        if (dash == std::string_view::npos) {
            if (!parse_decimal(item, 4, max, lo)) return false;
            hi = lo;
        } else if (!parse_decimal(item.substr(0, dash), 4, max, lo) ||
                   !parse_decimal(item.substr(dash + 1), 4, max, hi) || lo > hi) {
            return false;
        }
        for (uint64_t i = lo; i <= hi; ++i)
            out.insert(static_cast<unsigned>(i));
        if (comma == std::string_view::npos) return true;
        s = s.substr(comma + 1);
    }
}

LcoreSpec parse_lcores(std::string_view s) {
    LcoreSpec out;
    if (s.empty()) return out;
    if (s.find_first_of("@()") == std::string_view::npos) {
        if (!parse_lcore_side(s, kMaxLcore, out.set)) return out;
        out.kind = LcoreSpec::simple;
        return out;
    }
    // Split at the commas outside brackets.
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= s.size(); ++i) {
        char c = i < s.size() ? s[i] : ',';
        if (c == '(' && ++depth > 1) return out;
        if (c == ')' && --depth < 0) return out;
        if (c != ',' || depth != 0) continue;
        std::string_view item = s.substr(start, i - start);
        start = i + 1;
        size_t at = item.find('@');
        std::set<unsigned> cpus;
        if (!parse_lcore_side(item.substr(0, at), kMaxLcore, out.set)) return out;
        if (at != std::string_view::npos && !parse_lcore_side(item.substr(at + 1), kMaxCpu, cpus)) return out;
    }
    if (depth != 0) return out;
    out.kind = LcoreSpec::mapped;
    return out;
}

std::string format_lcore_set(const std::set<unsigned>& s) {
    std::string out;
    for (unsigned v : s) {
        if (!out.empty()) out += ',';
        out += std::to_string(v);
    }
    return out;
}

bool is_unicast_mac(const MacAddr& m) {
    if (m.bytes[0] & 1) return false;
    return std::any_of(std::begin(m.bytes), std::end(m.bytes), [](uint8_t b) { return b != 0; });
}

// The parser: builds the document and rejects a key repeated within one object, which plain
// nlohmann::json would silently resolve to the last occurrence.
class DuplicateKeyCheck {
public:
    explicit DuplicateKeyCheck(const std::string& file) : file_(file) {}

    bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
        switch (event) {
        case json::parse_event_t::object_start:
        case json::parse_event_t::array_start: {
            std::string path = frames_.empty() ? std::string("$") : element_path();
            frames_.push_back(Frame{event == json::parse_event_t::array_start, std::move(path), {}, {}, 0});
            break;
        }
        case json::parse_event_t::object_end:
        case json::parse_event_t::array_end:
            frames_.pop_back();
            element_done();
            break;
        case json::parse_event_t::key: {
            Frame& f = frames_.back();
            f.key = parsed.get<std::string>();
            if (!f.keys.insert(f.key).second)
                throw ConfigError(file_, key_path(f.path, f.key),
                                  "expected each key at most once per object, got " + quote(f.key) + " twice");
            break;
        }
        case json::parse_event_t::value:
            element_done();
            break;
        }
        return true;
    }

private:
    struct Frame {
        bool array;
        std::string path;
        std::set<std::string> keys;
        std::string key;
        size_t index;
    };

    std::string element_path() const {
        const Frame& f = frames_.back();
        return f.array ? index_path(f.path, f.index) : key_path(f.path, f.key);
    }
    void element_done() {
        if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    }

    const std::string& file_;
    std::vector<Frame> frames_;
};

class Loader;

// A JSON object whose keys are checked against the accepted ones on construction.
class Obj {
public:
    Obj(const Loader& l, const json& j, std::string path, std::initializer_list<std::string_view> keys,
        const std::string& what);

    const json* get(const std::string& k) const {
        auto it = j_.find(k);
        return it == j_.end() ? nullptr : &*it;
    }
    const json& require(const std::string& k, const std::string& what) const;
    std::string at(std::string_view k) const { return key_path(path_, k); }
    const std::string& path() const { return path_; }

private:
    const Loader& l_;
    const json& j_;
    std::string path_;
};

class Loader {
public:
    explicit Loader(std::string file) : file_(std::move(file)) {}

    Config load(const std::string& text) {
        json doc;
        try {
            DuplicateKeyCheck check(file_);
            doc = json::parse(text, std::ref(check), true, /*ignore_comments=*/true);
        } catch (const json::parse_error& e) {
            fail("$", "expected valid JSON, got " + syntax_error(text, e));
        } catch (const json::out_of_range& e) {
            // A number too large for a double (found by the config fuzzer: it escaped as an
            // exception that was not a ConfigError).
            std::string what = e.what();
            if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
            fail("$", "expected valid JSON, got " + what);
        }
        Config c;
        c.file = file_;
        read(doc, c);
        return c;
    }

    [[noreturn]] void fail(const std::string& path, const std::string& message) const {
        throw ConfigError(file_, path, message);
    }
    [[noreturn]] void expected(const std::string& path, const std::string& what, const json& got) const {
        fail(path, "expected " + what + ", got " + describe(got));
    }

private:
    static std::string syntax_error(const std::string& text, const json::parse_error& e) {
        // e.byte is the 1-based offset of the character where parsing stopped.
        size_t stop = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
        size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(stop), '\n'));
        size_t line_start = text.rfind('\n', stop == 0 ? std::string::npos : stop - 1);
        size_t column = stop == 0 ? 1 : (line_start == std::string::npos ? stop + 1 : stop - line_start);
        // nlohmann's text: "[json.exception.parse_error.101] parse error at line L, column C: <detail>"
        std::string detail = e.what();
        size_t col = detail.find("column ");
        size_t sep = col == std::string::npos ? std::string::npos : detail.find(": ", col);
        if (sep != std::string::npos) detail = detail.substr(sep + 2);
        return "a syntax error at line " + std::to_string(line) + ", column " + std::to_string(column) + " (" + detail +
               ")";
    }

    // --- scalar readers -------------------------------------------------------------------

    uint64_t integer(const json& j, const std::string& path, uint64_t lo, uint64_t hi) const {
        std::string what = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
        uint64_t v = 0;
        if (j.is_number_unsigned()) {
            v = j.get<uint64_t>();
        } else if (j.is_number_integer() && j.get<int64_t>() == 0) {
            v = 0;  // "-0"
        } else {
            expected(path, what, j);
        }
        if (v < lo || v > hi) expected(path, what, j);
        return v;
    }

    template <typename T>
    void opt_integer(const Obj& o, const char* key, T& dst, uint64_t lo, uint64_t hi) const {
        if (const json* j = o.get(key)) dst = static_cast<T>(integer(*j, o.at(key), lo, hi));
    }

    bool boolean(const json& j, const std::string& path) const {
        if (!j.is_boolean()) expected(path, "true or false", j);
        return j.get<bool>();
    }

    const std::string& string(const json& j, const std::string& path, const std::string& what) const {
        if (!j.is_string()) expected(path, what, j);
        return j.get_ref<const std::string&>();
    }

    const std::string& nonempty_string(const json& j, const std::string& path, const std::string& what) const {
        const std::string& s = string(j, path, what);
        if (s.empty()) expected(path, what, j);
        return s;
    }

    const json& array(const json& j, const std::string& path, const std::string& what, bool nonempty) const {
        if (!j.is_array() || (nonempty && j.empty())) expected(path, what, j);
        return j;
    }

    // An address of either family. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is refused: the
    // IPv4 address itself is what is meant, and two spellings of one address would compare unequal.
    IpAddr ip(const json& j, const std::string& path) const {
        static const std::string what = "an IPv4 or IPv6 address like 192.0.2.1 or 2001:db8::1";
        auto a = net::parse_ip(string(j, path, what));
        if (!a) expected(path, what, j);
        if (a->is_v4_mapped())
            fail(path,
                 "expected an IPv4 address written as IPv4, got " + describe(j) + " (an IPv4-mapped IPv6 address)");
        return *a;
    }

    IpPrefix prefix(const json& j, const std::string& path, const std::string& what) const {
        auto p = net::parse_prefix(string(j, path, what));
        if (!p) expected(path, what, j);
        if (p->addr.is_v4_mapped())
            fail(path, "expected an IPv4 prefix written as IPv4, got " + describe(j) + " (an IPv4-mapped IPv6 prefix)");
        return *p;
    }

    // A network prefix (route, CIDR): host bits must be zero.
    IpPrefix network_prefix(const json& j, const std::string& path) const {
        IpPrefix p = prefix(j, path, "an IPv4 or IPv6 prefix like 10.0.0.0/16 or 2001:db8::/64");
        if (p.addr != p.network())
            fail(path, "expected a prefix without host bits, got " + describe(j) + " (did you mean \"" +
                           net::to_string(IpPrefix{p.network(), p.len}) + "\"?)");
        return p;
    }

    // An interface address with its prefix length: host bits are the address. Link-local IPv6
    // addresses are not configured (the gateway does not use them yet, docs/configuration.md).
    IpPrefix interface_address(const json& j, const std::string& path) const {
        IpPrefix p = prefix(j, path, "an IPv4 or IPv6 prefix like 10.0.0.1/24 or 2001:db8::1/64");
        const IpAddr& a = p.addr;
        bool special = a.is_unspecified() || a.is_loopback() || a.is_multicast();
        if (a.is_v4()) special = special || (a.v4() >> 24) == 0 || (a.v4() >> 28) == 0xf;
        if (p.len == 0 || special) {
            expected(path,
                     a.is_v4() ? "a unicast interface address with a prefix length from 1 to 32, like 10.0.0.1/24"
                               : "a unicast interface address with a prefix length from 1 to 128, like 2001:db8::1/64",
                     j);
        }
        if (a.is_v6() && a.is_link_local())
            expected(
                path,
                "a global or unique-local IPv6 address like 2001:db8::1/64 (link-local addresses are not configured)",
                j);
        return p;
    }

    MacAddr unicast_mac(const json& j, const std::string& path) const {
        static const std::string what = "a MAC address like 02:00:00:00:00:01";
        auto m = parse_mac(string(j, path, what));
        if (!m) expected(path, what, j);
        if (!is_unicast_mac(*m))
            expected(path, "a unicast MAC address (not zero, lowest bit of the first byte clear)", j);
        return *m;
    }

    std::vector<std::string> string_list(const Obj& o, const char* key, const std::string& what) const {
        std::vector<std::string> out;
        const json* j = o.get(key);
        if (!j) return out;
        array(*j, o.at(key), "an array of " + what, false);
        for (size_t i = 0; i < j->size(); ++i)
            out.push_back(nonempty_string((*j)[i], index_path(o.at(key), i), what));
        return out;
    }

    // --- sections -------------------------------------------------------------------------

    void read(const json& doc, Config& c) const {
        Obj top(*this, doc, "$",
                {"eal",     "workers",        "mempool",  "ports", "neighbors", "vrfs",       "routes",
                 "cluster", "default_action", "sessions", "arp",   "icmp",      "reassembly", "ingress",
                 "node",    "state",          "metrics",  "sync",  "egress_ip", "policy"},
                "a JSON object");
        LcoreSpec lcores = read_eal(top, c.eal);
        read_workers(top, c, lcores);
        read_mempool(top, c.mempool);
        read_vrfs(top, c.vrfs);
        read_ports(top, c);
        read_neighbors(top, c);
        read_routes(top, c);
        read_cluster(top, c.cluster);
        read_default_action(top, c.default_action);
        read_sessions(top, c.sessions, c.workers.size());
        read_arp(top, c.arp);
        read_icmp(top, c.icmp);
        read_reassembly(top, c.reassembly);
        read_ingress(top, c);
        read_node(top, c.node);
        read_state(top, c.state);
        read_metrics(top, c.metrics);
        read_sync(top, c.sync);
        read_egress_ip(top, c.egress_ip);
        read_policy(top, c.policy);
    }

    LcoreSpec read_eal(const Obj& top, EalConfig& e) const {
        LcoreSpec spec = parse_lcores(e.lcores);
        const json* j = top.get("eal");
        if (!j) return spec;
        Obj o(*this, *j, top.at("eal"),
              {"lcores", "main_lcore", "no_huge", "memory_mb", "file_prefix", "vdevs", "pci_allow", "extra_args"},
              "an object");
        if (const json* v = o.get("lcores")) {
            static const std::string what = "an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to " +
                                            std::to_string(kMaxLcore) + "), or EAL's mapping form like " +
                                            "\"0@0,(1-2)@(4-5)\" (CPUs 0 to " + std::to_string(kMaxCpu) + ")";
            e.lcores = string(*v, o.at("lcores"), what);
            spec = parse_lcores(e.lcores);
            if (spec.kind == LcoreSpec::invalid) expected(o.at("lcores"), what, *v);
        }
        opt_integer(o, "main_lcore", e.main_lcore, 0, kMaxLcore);
        if (!spec.set.count(e.main_lcore))
            fail(o.get("main_lcore") ? o.at("main_lcore") : o.at("lcores"),
                 "expected the main lcore to be one of the lcores \"" + e.lcores + "\", got " +
                     std::to_string(e.main_lcore));
        if (const json* v = o.get("no_huge")) e.no_huge = boolean(*v, o.at("no_huge"));
        opt_integer(o, "memory_mb", e.memory_mb, 1, 1u << 20);
        if (const json* v = o.get("file_prefix")) {
            static const std::string what = "a file prefix of 1 to 64 characters from [A-Za-z0-9._-]";
            e.file_prefix = string(*v, o.at("file_prefix"), what);
            if (!valid_file_prefix(e.file_prefix)) expected(o.at("file_prefix"), what, *v);
        }
        e.vdevs = string_list(o, "vdevs", "virtual device specifications like \"net_tap0,iface=egw0\"");
        std::set<std::string> names;
        for (size_t i = 0; i < e.vdevs.size(); ++i) {
            std::string name = e.vdevs[i].substr(0, e.vdevs[i].find(','));
            bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
                return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
            });
            std::string path = index_path(o.at("vdevs"), i);
            if (!ok)
                expected(path, "a virtual device specification like \"net_tap0,iface=egw0\"", (*o.get("vdevs"))[i]);
            if (!names.insert(name).second)
                fail(path, "expected each virtual device name once, got " + quote(name) + " twice");
        }
        e.pci_allow = string_list(o, "pci_allow", "PCI addresses like \"0000:01:00.0\"");
        std::set<std::string> pcis;
        for (size_t i = 0; i < e.pci_allow.size(); ++i) {
            std::string addr = e.pci_allow[i].substr(0, e.pci_allow[i].find(','));
            auto norm = normalize_pci(addr);
            std::string path = index_path(o.at("pci_allow"), i);
            if (!norm)
                expected(path, "a PCI address like \"0000:01:00.0\" (optionally followed by \",devargs\")",
                         (*o.get("pci_allow"))[i]);
            if (!pcis.insert(*norm).second)
                fail(path, "expected each PCI address once, got " + quote(*norm) + " twice");
        }
        e.extra_args = string_list(o, "extra_args", "non-empty EAL arguments");
        return spec;
    }

    void read_workers(const Obj& top, Config& c, const LcoreSpec& lcores) const {
        static const std::string what = "a non-empty array of worker lcore ids like [1]";
        const json& j = array(top.require("workers", what), top.at("workers"), what, true);
        std::set<unsigned> seen;
        for (size_t i = 0; i < j.size(); ++i) {
            std::string path = index_path(top.at("workers"), i);
            auto id = static_cast<unsigned>(integer(j[i], path, 0, kMaxLcore));
            if (id == c.eal.main_lcore)
                fail(path, "expected a worker lcore other than the main lcore " + std::to_string(c.eal.main_lcore) +
                               " ($.eal.main_lcore), got " + std::to_string(id));
            if (!lcores.set.count(id))
                fail(path, "expected one of the lcores \"" + c.eal.lcores +
                               "\" ($.eal.lcores: " + format_lcore_set(lcores.set) + "), got " + std::to_string(id));
            if (!seen.insert(id).second)
                fail(path, "expected each worker lcore once, got " + std::to_string(id) + " twice");
            c.workers.push_back(id);
        }
    }

    void read_mempool(const Obj& top, MempoolConfig& m) const {
        const json* j = top.get("mempool");
        if (!j) return;
        Obj o(*this, *j, top.at("mempool"), {"mbufs", "cache", "data_room"}, "an object");
        opt_integer(o, "mbufs", m.mbufs, 1, 1u << 26);
        opt_integer(o, "cache", m.cache, 0, kMempoolCacheMax);
        opt_integer(o, "data_room", m.data_room, kMbufHeadroom + kMbufFirstSegment, 65535);
        // rte_mempool_create refuses a cache whose flush threshold (1.5 x cache) exceeds the pool.
        if (uint64_t{m.cache} * 3 / 2 > m.mbufs)
            fail(o.get("cache") ? o.at("cache") : o.at("mbufs"),
                 "expected a cache of at most mbufs / 1.5 (" + std::to_string(uint64_t{m.mbufs} * 2 / 3) + " for " +
                     std::to_string(m.mbufs) + " mbufs), got " + std::to_string(m.cache));
    }

    void read_vrfs(const Obj& top, std::vector<VrfConfig>& vrfs) const {
        vrfs.push_back(VrfConfig{kDefaultVrf, kDefaultTable});
        const json* j = top.get("vrfs");
        if (!j) return;
        array(*j, top.at("vrfs"), "an array of VRFs like [{\"name\": \"blue\", \"table\": 100}]", false);
        bool default_listed = false;
        for (size_t i = 0; i < j->size(); ++i) {
            Obj o(*this, (*j)[i], index_path(top.at("vrfs"), i), {"name", "table"},
                  "a VRF like {\"name\": \"blue\", \"table\": 100}");
            static const std::string name_what = "a VRF name like \"blue\"";
            const json& name_j = o.require("name", name_what);
            const std::string& name = string(name_j, o.at("name"), name_what);
            switch (check_vrf_name(name)) {
            case VrfNameProblem::none:
                break;
            case VrfNameProblem::empty:
                expected(o.at("name"), name_what, name_j);
            case VrfNameProblem::too_long:
                expected(o.at("name"), "a VRF name of at most 63 characters", name_j);
            case VrfNameProblem::bad_char:
                expected(o.at("name"), "a VRF name without spaces, control characters or '/'", name_j);
            case VrfNameProblem::numeric:
                expected(o.at("name"), "a VRF name that is not a number (numbers refer to tables)", name_j);
            }
            static const std::string table_what = "a routing table number from 1 to 4294967294";
            uint32_t table = 0;
            if (name == kDefaultVrf) {
                if (const json* t = o.get("table")) {
                    table = static_cast<uint32_t>(integer(*t, o.at("table"), 1, 4294967294u));
                    if (table != kDefaultTable)
                        fail(o.at("table"), "expected table 254 for the VRF \"default\" (Linux's main table), got " +
                                                std::to_string(table));
                }
                if (default_listed) fail(o.at("name"), "expected each VRF name once, got \"default\" twice");
                default_listed = true;
                continue;  // already first in the list
            }
            table = static_cast<uint32_t>(integer(o.require("table", table_what), o.at("table"), 1, 4294967294u));
            for (const auto& v : vrfs) {
                if (v.name == name) fail(o.at("name"), "expected each VRF name once, got " + quote(name) + " twice");
                if (v.table == table)
                    fail(o.at("table"), "expected each table number once, got " + std::to_string(table) +
                                            ", already used by VRF " + quote(v.name));
            }
            vrfs.push_back(VrfConfig{name, table});
        }
    }

    // Whether `device` can exist once EAL has started with these arguments.
    void check_device(const EalConfig& e, const std::string& device, const std::string& path) const {
        auto pci = normalize_pci(device.substr(0, std::min<size_t>(device.find('_'), device.size())));
        if (pci) {
            // egwd passes --no-pci when pci_allow is empty, so a PCI port must be listed there.
            for (const auto& a : e.pci_allow)
                if (normalize_pci(a.substr(0, a.find(','))) == pci) return;
            fail(path, "expected a PCI device listed in $.eal.pci_allow, got " + quote(device));
        }
        for (const auto& v : e.vdevs)
            if (v.substr(0, v.find(',')) == device) return;
        fail(path, "expected a device declared in $.eal.vdevs (like \"net_af_packet0\") or a PCI address, got " +
                       quote(device));
    }

    void read_ports(const Obj& top, Config& c) const {
        static const std::string what = "a non-empty array of ports";
        const json& j = array(top.require("ports", what), top.at("ports"), what, true);
        std::set<std::string> devices;
        for (size_t i = 0; i < j.size(); ++i) {
            Obj o(*this, j[i], index_path(top.at("ports"), i),
                  {"name", "device", "parent", "vlan", "role", "vrf", "addresses", "mac", "mtu", "rx_desc", "tx_desc",
                   "queues"},
                  "a port like {\"name\": \"ext1\", \"device\": \"net_af_packet0\", \"role\": \"outside\"}");
            // Every port, VLANs included, is one of the data plane's logical ports (dp::kMaxPorts).
            if (i == kMaxPortsWithVlans)
                fail(index_path(top.at("ports"), i), "expected at most " + std::to_string(kMaxPortsWithVlans) +
                                                         " ports (VLANs count as ports), got " +
                                                         std::to_string(j.size()));
            PortConfig p;

            static const std::string name_what = "a port name of 1 to 32 characters from [A-Za-z0-9._-]";
            const json& name_j = o.require("name", name_what);
            p.name = string(name_j, o.at("name"), name_what);
            if (!valid_port_name(p.name)) expected(o.at("name"), name_what, name_j);
            if (c.find_port(p.name))
                fail(o.at("name"), "expected each port name once, got " + quote(p.name) + " twice");

            const PortConfig* parent = nullptr;
            if (o.get("parent") || o.get("vlan")) {
                parent = read_vlan(o, c, p);
            } else {
                static const std::string dev_what =
                    "a DPDK device name like \"net_af_packet0\" or \"0000:01:00.0\" (or \"parent\" and \"vlan\" for "
                    "a VLAN)";
                p.device = nonempty_string(o.require("device", dev_what), o.at("device"), dev_what);
                check_device(c.eal, p.device, o.at("device"));
                std::string dev_key = p.device;
                if (auto pci = normalize_pci(p.device)) dev_key = *pci;
                if (!devices.insert(dev_key).second)
                    fail(o.at("device"), "expected each device in one port only, got " + quote(p.device) + " twice");
            }

            static const std::string role_what = "\"inside\" or \"outside\"";
            const json& role_j = o.require("role", role_what);
            const std::string& role = string(role_j, o.at("role"), role_what);
            if (role == "inside")
                p.role = PortRole::inside;
            else if (role == "outside")
                p.role = PortRole::outside;
            else
                expected(o.at("role"), role_what, role_j);

            if (const json* v = o.get("vrf")) {
                p.vrf = string(*v, o.at("vrf"), "a VRF name");
                if (!find_vrf_by_name(c.vrfs, p.vrf))
                    fail(o.at("vrf"),
                         "expected a VRF declared in $.vrfs (" + vrf_names(c.vrfs) + "), got " + describe(*v));
            }

            if (const json* v = o.get("addresses")) {
                array(*v, o.at("addresses"),
                      "an array of IPv4 or IPv6 prefixes like [\"10.0.0.1/24\", \"2001:db8::1/64\"]", false);
                for (size_t k = 0; k < v->size(); ++k) {
                    std::string path = index_path(o.at("addresses"), k);
                    IpPrefix a = interface_address((*v)[k], path);
                    // The same address twice in one VRF would make the gateway's own address ambiguous.
                    for (const auto& a2 : p.addresses)
                        if (a2.addr == a.addr)
                            fail(path, "expected each address once, got " + net::to_string(a.addr) + " twice");
                    for (const auto& other : c.ports)
                        if (other.vrf == p.vrf)
                            for (const auto& a2 : other.addresses)
                                if (a2.addr == a.addr)
                                    fail(path, "expected an address unique in VRF " + quote(p.vrf) + ", got " +
                                                   net::to_string(a.addr) + " which port " + quote(other.name) +
                                                   " already has");
                    if (std::count_if(p.addresses.begin(), p.addresses.end(), [&](const IpPrefix& a2) {
                            return a2.addr.is_v6() == a.addr.is_v6();
                        }) == kMaxAddressesPerFamily)
                        fail(path, std::string("expected at most ") + std::to_string(kMaxAddressesPerFamily) +
                                       (a.addr.is_v6() ? " IPv6" : " IPv4") + " addresses on a port, got " +
                                       net::to_string(a.addr) + " as one more");
                    p.addresses.push_back(a);
                }
            }
            if (const json* v = o.get("mac")) p.mac = unicast_mac(*v, o.at("mac"));
            opt_integer(o, "mtu", p.mtu, 68, 16128);
            // The tag rides in the parent's frames, outside the IP MTU: a VLAN's datagrams are
            // no larger than its parent's.
            if (parent && p.mtu > parent->mtu)
                fail(o.at("mtu"), "expected at most the MTU of parent port " + quote(parent->name) + " (" +
                                      std::to_string(parent->mtu) + ") on a VLAN, got " + std::to_string(p.mtu));
            // RFC 8200 5: every link that carries IPv6 has an MTU of 1280 or more; below it the
            // port could neither send the packets IPv6 allows nor make them fit.
            if (p.mtu < 1280 &&
                std::any_of(p.addresses.begin(), p.addresses.end(), [](const IpPrefix& a) { return a.addr.is_v6(); }))
                fail(o.at("mtu"),
                     "expected at least 1280 on a port with an IPv6 address (RFC 8200), got " + std::to_string(p.mtu));
            opt_integer(o, "rx_desc", p.rx_desc, 16, 32768);
            opt_integer(o, "tx_desc", p.tx_desc, 16, 32768);
            opt_integer(o, "queues", p.queues, 1, 16);  // dp::kMaxWorkers
            c.ports.push_back(std::move(p));
        }
        for (PortRole r : {PortRole::inside, PortRole::outside})
            if (std::none_of(c.ports.begin(), c.ports.end(), [&](const PortConfig& p) { return p.role == r; }))
                fail(top.at("ports"),
                     std::string("expected at least one port with role \"") + to_string(r) + "\", got none");
    }

    // A VLAN port's "parent" and "vlan" (and what it may not have): its parent, declared before
    // it and not a VLAN itself, each VLAN id once per parent.
    const PortConfig* read_vlan(const Obj& o, const Config& c, PortConfig& p) const {
        static const std::string parent_what = "the name of a port declared before this one";
        const json& parent_j = o.require("parent", parent_what);
        p.parent = string(parent_j, o.at("parent"), parent_what);
        const PortConfig* parent = c.find_port(p.parent);
        if (!parent)
            fail(o.at("parent"), "expected a port declared before this one in $.ports (" + port_names(c.ports) +
                                     "), got " + describe(parent_j));
        if (parent->is_vlan())
            fail(o.at("parent"), "expected a port with a device as the parent (VLANs are not stacked), got " +
                                     quote(p.parent) + ", itself a VLAN of " + quote(parent->parent));
        static const std::string vlan_what = "a VLAN id from 1 to 4094";
        const json& vlan_j = o.require("vlan", vlan_what);
        if (!vlan_j.is_number_unsigned() || vlan_j.get<uint64_t>() < 1 || vlan_j.get<uint64_t>() > 4094)
            expected(o.at("vlan"), vlan_what, vlan_j);
        p.vlan = static_cast<unsigned>(vlan_j.get<uint64_t>());
        for (const auto& other : c.ports)
            if (other.parent == p.parent && other.vlan == p.vlan)
                fail(o.at("vlan"), "expected each VLAN id once on port " + quote(p.parent) + ", got " +
                                       std::to_string(p.vlan) + " which port " + quote(other.name) + " already has");
        for (const char* own : {"device", "mac", "rx_desc", "tx_desc", "queues"})
            if (o.get(own))
                fail(o.at(own), std::string("expected no \"") + own + "\" on a VLAN (it uses its parent's), got " +
                                    describe(*o.get(own)));
        return parent;
    }

    static const VrfConfig* find_vrf_by_name(const std::vector<VrfConfig>& vrfs, const std::string& name) {
        for (const auto& v : vrfs)
            if (v.name == name) return &v;
        return nullptr;
    }

    static std::string vrf_names(const std::vector<VrfConfig>& vrfs) {
        std::string out;
        for (const auto& v : vrfs)
            out += (out.empty() ? "" : ", ") + quote(v.name);
        return out;
    }

    static std::string port_names(const std::vector<PortConfig>& ports) {
        std::string out;
        for (const auto& p : ports)
            out += (out.empty() ? "" : ", ") + quote(p.name);
        return out;
    }

    static std::string address_list(const PortConfig& p) {
        if (p.addresses.empty()) return "it has no addresses";
        std::string out;
        for (const auto& a : p.addresses)
            out += (out.empty() ? "" : ", ") + net::to_string(a);
        return "its addresses are " + out;
    }

    const PortConfig& port_ref(const Config& c, const Obj& o, const json& j) const {
        const std::string& name = string(j, o.at("port"), "a port name");
        const PortConfig* p = c.find_port(name);
        if (!p)
            fail(o.at("port"), "expected a port declared in $.ports (" + port_names(c.ports) + "), got " + describe(j));
        return *p;
    }

    // A next hop or neighbour must be on-link: inside one of the port's prefixes of its family, not
    // the port itself. An IPv6 link-local address is on-link on every port (that is what it is for:
    // routers commonly announce themselves by one).
    void check_on_link(const PortConfig& p, const IpAddr& ip, const std::string& path, const std::string& role) const {
        if (ip.is_unspecified() || ip.is_loopback() || ip.is_multicast())
            fail(path, "expected " + role + " that is a unicast address, got " + net::to_string(ip));
        bool on_link = ip.is_v6() && ip.is_link_local();
        for (const auto& a : p.addresses) {
            if (a.addr == ip)
                fail(path, "expected " + role + " other than port " + quote(p.name) + "'s own address, got " +
                               net::to_string(ip));
            on_link = on_link || a.contains(ip);
        }
        if (!on_link)
            fail(path, "expected " + role + " on-link on port " + quote(p.name) + " (" + address_list(p) + "), got " +
                           net::to_string(ip));
    }

    void read_neighbors(const Obj& top, Config& c) const {
        const json* j = top.get("neighbors");
        if (!j) return;
        array(*j, top.at("neighbors"), "an array of static neighbours", false);
        for (size_t i = 0; i < j->size(); ++i) {
            Obj o(*this, (*j)[i], index_path(top.at("neighbors"), i), {"port", "ip", "mac"},
                  "a neighbour like {\"port\": \"ext1\", \"ip\": \"192.0.2.254\", \"mac\": \"02:00:00:00:00:fe\"}");
            NeighborConfig n;
            const PortConfig& p = port_ref(c, o, o.require("port", "a port name"));
            n.port = p.name;
            n.ip = ip(o.require("ip", "an IPv4 or IPv6 address like 192.0.2.254 or 2001:db8::fe"), o.at("ip"));
            check_on_link(p, n.ip, o.at("ip"), "a neighbour address");
            for (const auto& other : c.neighbors)
                if (other.port == n.port && other.ip == n.ip)
                    fail(o.at("ip"), "expected each neighbour once per port, got " + net::to_string(n.ip) +
                                         " on port " + quote(n.port) + " twice");
            n.mac = unicast_mac(o.require("mac", "a MAC address like 02:00:00:00:00:fe"), o.at("mac"));
            c.neighbors.push_back(n);
        }
    }

    void read_routes(const Obj& top, Config& c) const {
        const json* j = top.get("routes");
        if (!j) return;
        array(*j, top.at("routes"), "an array of routes", false);
        for (size_t i = 0; i < j->size(); ++i) {
            Obj o(*this, (*j)[i], index_path(top.at("routes"), i), {"vrf", "prefix", "via", "port"},
                  "a route like {\"prefix\": \"0.0.0.0/0\", \"via\": \"192.0.2.254\", \"port\": \"ext1\"}");
            RouteConfig r;
            if (const json* v = o.get("vrf")) {
                r.vrf = string(*v, o.at("vrf"), "a VRF name");
                if (!find_vrf_by_name(c.vrfs, r.vrf))
                    fail(o.at("vrf"),
                         "expected a VRF declared in $.vrfs (" + vrf_names(c.vrfs) + "), got " + describe(*v));
            }
            r.prefix =
                network_prefix(o.require("prefix", "an IPv4 or IPv6 prefix like 0.0.0.0/0 or ::/0"), o.at("prefix"));
            const PortConfig& p = port_ref(c, o, o.require("port", "the name of the port the route leaves through"));
            r.port = p.name;
            if (p.vrf != r.vrf)
                fail(o.at("port"), "expected a port in VRF " + quote(r.vrf) + ", got " + quote(p.name) +
                                       " which is in VRF " + quote(p.vrf));
            if (const json* v = o.get("via")) {
                r.via = ip(*v, o.at("via"));
                if (r.via->family() != r.prefix.family())
                    fail(o.at("via"), std::string("expected a next hop of the prefix's family (") +
                                          net::to_string(r.prefix.family()) + "), got " + describe(*v));
                check_on_link(p, *r.via, o.at("via"), "a next hop");
            }
            for (const auto& other : c.routes)
                if (other.vrf == r.vrf && other.prefix == r.prefix)
                    fail(o.at("prefix"), "expected each prefix once per VRF, got " + net::to_string(r.prefix) +
                                             " twice in VRF " + quote(r.vrf));
            c.routes.push_back(r);
        }
    }

    std::vector<IpPrefix> prefix_list(const Obj& o, const char* key, bool required) const {
        static const std::string what =
            "a non-empty array of IPv4 or IPv6 prefixes like [\"10.244.0.0/16\", \"fd00:10:244::/56\"]";
        std::vector<IpPrefix> out;
        const json* j = required ? &o.require(key, what) : o.get(key);
        if (!j) return out;
        array(*j, o.at(key),
              required ? what : "an array of IPv4 or IPv6 prefixes like [\"10.96.0.0/12\", \"fd00:10:96::/112\"]",
              required);
        for (size_t i = 0; i < j->size(); ++i) {
            std::string path = index_path(o.at(key), i);
            IpPrefix p = network_prefix((*j)[i], path);
            if (std::find(out.begin(), out.end(), p) != out.end())
                fail(path, "expected each prefix once, got " + net::to_string(p) + " twice");
            out.push_back(p);
        }
        return out;
    }

    void read_cluster(const Obj& top, ClusterConfig& cl) const {
        const json& j = top.require("cluster", "an object like {\"pod_cidrs\": [\"10.244.0.0/16\"]}");
        Obj o(*this, j, top.at("cluster"), {"pod_cidrs", "service_cidrs", "node_ips"}, "an object");
        cl.pod_cidrs = prefix_list(o, "pod_cidrs", true);
        cl.service_cidrs = prefix_list(o, "service_cidrs", false);
        if (const json* v = o.get("node_ips")) {
            array(*v, o.at("node_ips"),
                  "an array of IPv4 or IPv6 addresses like [\"172.18.0.2\", \"fc00:f853:ccd:e793::2\"]", false);
            for (size_t i = 0; i < v->size(); ++i) {
                std::string path = index_path(o.at("node_ips"), i);
                IpAddr a = ip((*v)[i], path);
                if (std::find(cl.node_ips.begin(), cl.node_ips.end(), a) != cl.node_ips.end())
                    fail(path, "expected each node IP once, got " + net::to_string(a) + " twice");
                cl.node_ips.push_back(a);
            }
        }
    }

    void read_default_action(const Obj& top, DefaultAction& a) const {
        const json* j = top.get("default_action");
        if (!j) return;
        static const std::string what = "\"route\", \"masquerade\" or \"drop\"";
        const std::string& s = string(*j, top.at("default_action"), what);
        if (s == "route")
            a = DefaultAction::route;
        else if (s == "masquerade")
            a = DefaultAction::masquerade;
        else if (s == "drop")
            a = DefaultAction::drop;
        else
            expected(top.at("default_action"), what, *j);
    }

    void read_sessions(const Obj& top, SessionConfig& s, size_t workers) const {
        const json* j = top.get("sessions");
        if (!j) return;
        Obj o(*this, *j, top.at("sessions"),
              {"max", "max_ipv6", "port_min", "port_max", "timeouts", "tcp_open", "max_per_pod"}, "an object");
        if (const json* t = o.get("tcp_open")) {
            static const std::string what = "\"loose\" or \"strict\"";
            const std::string& v = string(*t, o.at("tcp_open"), what);
            if (v == "loose")
                s.tcp_open = TcpOpen::loose;
            else if (v == "strict")
                s.tcp_open = TcpOpen::strict;
            else
                expected(o.at("tcp_open"), what, *t);
        }
        opt_integer(o, "max", s.max_sessions, 1, 1u << 28);
        // The IPv6 table is sized apart: an IPv4-only gateway sets 0 and saves its memory.
        s.max_sessions_ipv6 = s.max_sessions;
        opt_integer(o, "max_ipv6", s.max_sessions_ipv6, 0, 1u << 28);
        opt_integer(o, "max_per_pod", s.max_per_pod, 0, 1u << 28);
        opt_integer(o, "port_min", s.port_min, 1, 65535);
        opt_integer(o, "port_max", s.port_max, 1, 65535);
        if (s.port_min > s.port_max)
            fail(o.get("port_max") ? o.at("port_max") : o.at("port_min"),
                 "expected port_min <= port_max, got port_min " + std::to_string(s.port_min) + " and port_max " +
                     std::to_string(s.port_max));
        const size_t ports = size_t{s.port_max} - s.port_min + 1;
        if (ports < workers)
            fail(o.get("port_max") ? o.at("port_max") : o.at("port_min"),
                 "expected a NAT port range of at least " + std::to_string(workers) +
                     " ports (one block per worker), got " + std::to_string(ports));
        if (const json* t = o.get("timeouts")) {
            Obj to(*this, *t, o.at("timeouts"), {"tcp_established", "tcp_transitory", "tcp_half_closed", "udp", "icmp"},
                   "an object");
            constexpr uint64_t kWeek = 7 * 24 * 3600;
            opt_integer(to, "tcp_established", s.timeouts.tcp_established_s, 1, kWeek);
            opt_integer(to, "tcp_transitory", s.timeouts.tcp_transitory_s, 1, kWeek);
            opt_integer(to, "tcp_half_closed", s.timeouts.tcp_half_closed_s, 1, kWeek);
            opt_integer(to, "udp", s.timeouts.udp_s, 1, kWeek);
            opt_integer(to, "icmp", s.timeouts.icmp_s, 1, kWeek);
        }
    }

    void read_arp(const Obj& top, ArpConfig& a) const {
        const json* j = top.get("arp");
        if (!j) return;
        Obj o(*this, *j, top.at("arp"),
              {"max_neighbors", "hold_packets", "retry_ms", "reachable_s", "probes", "unused_s", "announce_count",
               "announce_interval_ms"},
              "an object");
        opt_integer(o, "max_neighbors", a.max_neighbors, 1, 1u << 20);
        opt_integer(o, "hold_packets", a.hold_packets, 0, 65536);
        opt_integer(o, "retry_ms", a.retry_ms, 10, 60000);
        opt_integer(o, "reachable_s", a.reachable_s, 1, 86400);
        opt_integer(o, "probes", a.probes, 1, 100);
        opt_integer(o, "unused_s", a.unused_s, 1, 86400);
        opt_integer(o, "announce_count", a.announce_count, 0, 100);
        opt_integer(o, "announce_interval_ms", a.announce_interval_ms, 10, 60000);
    }

    void read_icmp(const Obj& top, IcmpConfig& i) const {
        const json* j = top.get("icmp");
        if (!j) return;
        Obj o(*this, *j, top.at("icmp"), {"errors_per_second", "burst"}, "an object");
        opt_integer(o, "errors_per_second", i.errors_per_second, 0, 1000000);
        opt_integer(o, "burst", i.burst, 1, 100000);
    }

    void read_reassembly(const Obj& top, ReassemblyConfig& r) const {
        const json* j = top.get("reassembly");
        if (!j) return;
        Obj o(*this, *j, top.at("reassembly"), {"max_datagrams", "max_fragments", "timeout_ms", "max_per_source"},
              "an object");
        opt_integer(o, "max_datagrams", r.max_datagrams, 1, 65536);
        opt_integer(o, "max_fragments", r.max_fragments, 2, kMaxReassemblyFragments);
        opt_integer(o, "timeout_ms", r.timeout_ms, 10, 120000);
        opt_integer(o, "max_per_source", r.max_per_source, 1, 65536);
        if (r.max_per_source > r.max_datagrams)
            fail(o.at("max_per_source"), "expected at most reassembly.max_datagrams (" +
                                             std::to_string(r.max_datagrams) + "), got " +
                                             std::to_string(r.max_per_source));
    }

    void read_ingress(const Obj& top, Config& c) const {
        const json* j = top.get("ingress");
        if (!j) return;
        static const std::string what = "an object like {\"via\": \"10.244.1.2\", \"port\": \"pods\"}";
        Obj o(*this, *j, top.at("ingress"), {"via", "via6", "port"}, what);
        const PortConfig& p = port_ref(c, o, o.require("port", "the name of the inside port toward the cluster"));
        if (p.role != PortRole::inside)
            fail(o.at("port"), "expected an inside port (ingress goes into the cluster), got " + quote(p.name) +
                                   " which is an outside port");
        const json* v4 = o.get("via");
        const json* v6 = o.get("via6");
        if (!v4 && !v6)
            fail(top.at("ingress"), "expected a next hop: \"via\" (IPv4), \"via6\" (IPv6) or both, got neither");
        if (v4) {
            IpAddr via = ip(*v4, o.at("via"));
            if (!via.is_v4())
                fail(o.at("via"),
                     "expected an IPv4 address (an IPv6 next hop goes in \"via6\"), got " + net::to_string(via));
            check_on_link(p, via, o.at("via"), "a next hop");
            c.ingress.via = via;
        }
        if (v6) {
            IpAddr via6 = ip(*v6, o.at("via6"));
            if (!via6.is_v6())
                fail(o.at("via6"),
                     "expected an IPv6 address like fd00:10:244:1::2 (an IPv4 next hop goes in "
                     "\"via\"), got " +
                         net::to_string(via6));
            check_on_link(p, via6, o.at("via6"), "a next hop");
            c.ingress.via6 = via6;
        }
        c.ingress.port = p.name;
    }

    void read_node(const Obj& top, NodeConfig& n) const {
        const json& j = top.require("node", "an object like {\"name\": \"gw-1\"}");
        Obj o(*this, j, top.at("node"), {"name", "labels"}, "an object like {\"name\": \"gw-1\"}");
        static const std::string name_what =
            "a node name that is a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', at most 253) like "
            "\"gw-1\"";
        const json& name_j = o.require("name", name_what);
        n.name = string(name_j, o.at("name"), name_what);
        if (!valid_dns_subdomain(n.name)) expected(o.at("name"), name_what, name_j);
        if (const json* l = o.get("labels")) {
            if (!l->is_object()) expected(o.at("labels"), "an object of label keys to string values", *l);
            for (const auto& [k, v] : l->items()) {
                std::string path = key_path(o.at("labels"), k);
                if (!valid_label_key(k))
                    fail(path,
                         "expected a Kubernetes label key like \"example.com/role\" (optional DNS prefix, "
                         "name of at most 63 characters from [A-Za-z0-9._-]), got " +
                             quote(k));
                static const std::string value_what =
                    "a label value of at most 63 characters from [A-Za-z0-9._-], alphanumeric at both ends";
                const std::string& s = string(v, path, value_what);
                if (!valid_label_name(s, true)) expected(path, value_what, v);
                n.labels[k] = s;
            }
        }
    }

    std::string resolve(const std::string& p) const {
        namespace fs = std::filesystem;
        fs::path rel(p);
        fs::path full = rel.is_absolute() ? rel : fs::path(file_).parent_path() / rel;
        std::error_code ec;
        fs::path abs = fs::absolute(full, ec);
        if (!ec) full = abs;
        full = full.lexically_normal();
        if (!full.has_filename() && full.has_parent_path() && full != full.root_path()) full = full.parent_path();
        return full.string();
    }

    void read_state(const Obj& top, StateConfig& s) const {
        const json& j = top.require("state", "an object like {\"source\": \"files\", \"path\": \"manifests\"}");
        Obj o(*this, j, top.at("state"),
              {"source", "path", "poll_ms", "kubeconfig", "election", "lease_namespace", "lease_duration_s",
               "renew_deadline_ms", "retry_period_ms", "refusal_grace_ms"},
              "an object like {\"source\": \"files\", \"path\": \"manifests\"}");
        if (const json* v = o.get("source")) {
            static const std::string what = "\"files\" or \"kubernetes\"";
            const std::string& src = string(*v, o.at("source"), what);
            if (src == "files")
                s.source = StateSource::files;
            else if (src == "kubernetes")
                s.source = StateSource::kubernetes;
            else
                expected(o.at("source"), what, *v);
        }
        opt_integer(o, "poll_ms", s.poll_ms, 10, 60000);
        static const std::string kc_what = "a kubeconfig path, or \"\" for in-cluster credentials";
        const json* kc = o.get("kubeconfig");
        const std::string* kc_text = kc ? &string(*kc, o.at("kubeconfig"), kc_what) : nullptr;
        if (s.source == StateSource::files) {
            static const std::string what =
                "the manifest directory, relative to the configuration file's directory, like \"manifests\"";
            s.path = resolve(
                nonempty_string(o.require("path", what + " (required with source \"files\")"), o.at("path"), what));
            // A kubeconfig with the files source would be silently unused: most likely a half-edited file.
            if (kc_text && !kc_text->empty())
                expected(o.at("kubeconfig"),
                         "no kubeconfig with source \"files\" (it is only read with source \"kubernetes\")", *kc);
            for (const char* key : {"election", "lease_namespace", "lease_duration_s", "renew_deadline_ms",
                                    "retry_period_ms", "refusal_grace_ms"}) {
                if (const json* v = o.get(key))
                    expected(o.at(key),
                             std::string("no ") + key +
                                 " with source \"files\" (it is only read with source \"kubernetes\")",
                             *v);
            }
        } else {
            if (const json* v = o.get("path"))
                expected(o.at("path"), "no path with source \"kubernetes\" (it is only read with source \"files\")",
                         *v);
            if (kc_text && !kc_text->empty()) s.kubeconfig = resolve(*kc_text);
            read_election(o, s);
        }
    }

    void read_election(const Obj& o, StateConfig& s) const {
        if (const json* v = o.get("election")) {
            static const std::string what = "\"leader\" or \"external\"";
            const std::string& e = string(*v, o.at("election"), what);
            if (e == "leader")
                s.election = Election::leader;
            else if (e == "external")
                s.election = Election::external;
            else
                expected(o.at("election"), what, *v);
        }
        if (const json* v = o.get("lease_namespace")) {
            static const std::string what =
                "a namespace name (lower-case letters, digits and '-', at most 63), or \"\" for the credentials' "
                "namespace";
            const std::string& ns = string(*v, o.at("lease_namespace"), what);
            bool ok =
                ns.size() <= 63 &&
                std::all_of(ns.begin(), ns.end(),
                            [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }) &&
                (ns.empty() || (ns.front() != '-' && ns.back() != '-'));
            if (!ok) expected(o.at("lease_namespace"), what, *v);
            s.lease_namespace = ns;
        }
        opt_integer(o, "lease_duration_s", s.lease_duration_s, 1, 3600);
        opt_integer(o, "renew_deadline_ms", s.renew_deadline_ms, 100, 3600000);
        opt_integer(o, "retry_period_ms", s.retry_period_ms, 10, 3600000);
        opt_integer(o, "refusal_grace_ms", s.refusal_grace_ms, 0, 3600000);
        // The order client-go's leader election insists on: retry < renew deadline < lease duration.
        const uint64_t lease_ms = uint64_t{s.lease_duration_s} * 1000;
        if (s.renew_deadline_ms >= lease_ms) {
            const std::string at = o.get("renew_deadline_ms") ? o.at("renew_deadline_ms") : o.at("lease_duration_s");
            fail(at, "expected renew_deadline_ms shorter than lease_duration_s (" + std::to_string(lease_ms) +
                         " ms), got " + std::to_string(s.renew_deadline_ms));
        }
        if (s.retry_period_ms >= s.renew_deadline_ms) {
            const std::string at = o.get("retry_period_ms") ? o.at("retry_period_ms") : o.at("renew_deadline_ms");
            fail(at, "expected retry_period_ms shorter than renew_deadline_ms (" + std::to_string(s.renew_deadline_ms) +
                         " ms), got " + std::to_string(s.retry_period_ms));
        }
    }

    void read_metrics(const Obj& top, MetricsConfig& m) const {
        const json* j = top.get("metrics");
        if (!j) return;
        Obj o(*this, *j, top.at("metrics"), {"enabled", "listen"}, "an object like {\"listen\": \"127.0.0.1:9469\"}");
        m.enabled = true;
        if (const json* v = o.get("enabled")) m.enabled = boolean(*v, o.at("enabled"));
        if (const json* v = o.get("listen")) {
            static const std::string what =
                "an IP address and a TCP port like \"127.0.0.1:9469\", \"0.0.0.0:9469\" or \"[::]:9469\"";
            host_port(*v, o.at("listen"), what, m.host, m.port);
        }
    }

    // "a.b.c.d:port" or "[v6]:port", the address in canonical form so equal ones compare equal.
    void host_port(const json& v, const std::string& path, const std::string& what, std::string& host_out,
                   uint16_t& port_out) const {
        const std::string& s = string(v, path, what);
        size_t colon = s.rfind(':');
        std::string host = colon == std::string::npos ? "" : s.substr(0, colon);
        bool ok = false;
        if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
            in6_addr a6{};
            char text[INET6_ADDRSTRLEN];
            ok = ::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a6) == 1 &&
                 ::inet_ntop(AF_INET6, &a6, text, sizeof text) != nullptr;
            if (ok) host = text;
        } else if (auto ip = parse_ipv4(host)) {
            ok = true;
            host = format_ipv4(*ip);
        }
        uint64_t port = 0;
        if (!ok || !parse_decimal(std::string_view(s).substr(colon + 1), 5, 65535, port) || port == 0)
            expected(path, what, v);
        host_out = host;
        port_out = static_cast<uint16_t>(port);
    }

    void read_egress_ip(const Obj& top, EgressIPConfig& e) const {
        const json* j = top.get("egress_ip");
        if (!j) return;
        Obj o(*this, *j, top.at("egress_ip"), {"capacity"}, "an object like {\"capacity\": 10}");
        if (const json* v = o.get("capacity"))
            e.capacity = static_cast<uint32_t>(integer(*v, o.at("capacity"), 0, kMaxEgressIPCapacity));
    }

    void read_sync(const Obj& top, SyncConfig& c) const {
        const json* j = top.get("sync");
        if (!j) return;
        static const std::string section_what =
            "an object like {\"id\": 1, \"listen\": \"10.0.0.1:7470\", \"key_file\": \"sync.key\", \"peers\": "
            "[{\"id\": 2, \"address\": \"10.0.0.2:7470\"}]}";
        Obj o(*this, *j, top.at("sync"), {"id", "listen", "key_file", "peers", "mtu", "standby_max_sessions"},
              section_what);
        c.enabled = true;
        static const std::string id_what = "an integer from 1 to 4294967295";
        c.id = static_cast<uint32_t>(integer(o.require("id", id_what), o.at("id"), 1, 4294967295u));
        static const std::string addr_what =
            "an IP address and a UDP port like \"10.0.0.1:7470\" or \"[fd00::1]:7470\"";
        host_port(o.require("listen", addr_what), o.at("listen"), addr_what, c.host, c.port);
        static const std::string key_what =
            "the file of the key shared by the gateways, relative to the configuration file's directory, like "
            "\"sync.key\"";
        c.key_file = resolve(nonempty_string(o.require("key_file", key_what), o.at("key_file"), key_what));
        opt_integer(o, "mtu", c.mtu, 576, 65535);
        opt_integer(o, "standby_max_sessions", c.standby_max_sessions, 1, 100000000);
        static const std::string peers_what =
            "an array of the other gateways like [{\"id\": 2, \"address\": \"10.0.0.2:7470\"}]";
        const json& pj = o.require("peers", peers_what);
        array(pj, o.at("peers"), peers_what, true);
        for (size_t i = 0; i < pj.size(); ++i) {
            std::string path = index_path(o.at("peers"), i);
            Obj po(*this, pj[i], path, {"id", "address"}, "an object like {\"id\": 2, \"address\": \"10.0.0.2:7470\"}");
            SyncPeerConfig peer;
            peer.id = static_cast<uint32_t>(integer(po.require("id", id_what), po.at("id"), 1, 4294967295u));
            if (peer.id == c.id)
                fail(po.at("id"),
                     "expected another gateway's id, got this gateway's own (" + std::to_string(c.id) + ")");
            for (const SyncPeerConfig& other : c.peers)
                if (other.id == peer.id)
                    fail(po.at("id"), "expected a unique id, got " + std::to_string(peer.id) + " twice");
            host_port(po.require("address", addr_what), po.at("address"), addr_what, peer.host, peer.port);
            c.peers.push_back(std::move(peer));
        }
    }

    void read_policy(const Obj& top, PolicyConfig& p) const {
        const json* j = top.get("policy");
        if (!j) return;
        Obj o(*this, *j, top.at("policy"), {"egress_firewall", "egress_firewall_reject", "dns_servers"},
              "an object like {\"egress_firewall\": \"enforce\", \"dns_servers\": [\"10.96.0.10\"]}");
        if (const json* v = o.get("egress_firewall")) {
            static const std::string what = "\"enforce\" or \"off\"";
            const std::string& s = string(*v, o.at("egress_firewall"), what);
            if (s != "enforce" && s != "off") expected(o.at("egress_firewall"), what, *v);
            p.egress_firewall = s == "enforce";
        }
        if (const json* v = o.get("egress_firewall_reject")) {
            static const std::string what = "\"drop\" or \"icmp\"";
            const std::string& s = string(*v, o.at("egress_firewall_reject"), what);
            if (s != "drop" && s != "icmp") expected(o.at("egress_firewall_reject"), what, *v);
            p.egress_firewall_icmp = s == "icmp";
        }
        const json* servers = o.get("dns_servers");
        if (!servers) return;
        static const std::string list_what =
            "an array of DNS servers like [\"10.96.0.10\", \"[fd00::53]:5353\"] (empty: those of /etc/resolv.conf)";
        array(*servers, o.at("dns_servers"), list_what, false);
        static const std::string what =
            "a DNS server's IP address, optionally with a UDP port: \"10.96.0.10\", \"10.96.0.10:5353\", "
            "\"fd00::53\" or \"[fd00::53]:5353\"";
        for (size_t i = 0; i < servers->size(); ++i) {
            const std::string path = index_path(o.at("dns_servers"), i);
            const json& v = (*servers)[i];
            const std::string& s = string(v, path, what);
            std::string host;
            uint16_t port = 53;
            if (auto bare = net::parse_ip(s)) {
                host = net::to_string(*bare);
            } else {
                host_port(v, path, what, host, port);
            }
            std::string canonical = format_host_port(host, port);
            if (std::find(p.dns_servers.begin(), p.dns_servers.end(), canonical) != p.dns_servers.end())
                fail(path, "expected each server once, got " + canonical + " twice");
            p.dns_servers.push_back(std::move(canonical));
        }
    }

    std::string file_;
};

Obj::Obj(const Loader& l, const json& j, std::string path, std::initializer_list<std::string_view> keys,
         const std::string& what)
    : l_(l), j_(j), path_(std::move(path)) {
    if (!j.is_object()) l.expected(path_, what, j);
    for (const auto& item : j.items()) {
        const std::string& k = item.key();
        if (std::find(keys.begin(), keys.end(), std::string_view(k)) == keys.end())
            l.fail(key_path(path_, k), "unknown key " + quote(k) + ", expected one of: " + join(keys));
    }
}

const json& Obj::require(const std::string& k, const std::string& what) const {
    if (const json* v = get(k)) return *v;
    l_.fail(at(k), "missing required key, expected " + what);
}

}  // namespace

Config load_text(const std::string& text, const std::string& file) {
    return Loader(file).load(text);
}

Config load_file(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw ConfigError(path, "$", std::string("expected a readable file, got \"") + std::strerror(errno) + "\"");
    std::string text;
    char buf[65536];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
        text.append(buf, n);
    const bool failed = std::ferror(f) != 0;
    const int err = errno;
    std::fclose(f);
    if (failed)
        throw ConfigError(path, "$", std::string("expected a readable file, got \"") + std::strerror(err) + "\"");
    return load_text(text, path);
}

}  // namespace egw::config
