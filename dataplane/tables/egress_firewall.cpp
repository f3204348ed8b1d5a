// SPDX-License-Identifier: Apache-2.0
//
// Building and querying the EgressFirewall classifier. See egress_firewall.h.
#include "dataplane/tables/egress_firewall.h"

#include <rte_acl.h>
#include <rte_errno.h>
#include <rte_memory.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <vector>

namespace egw::dp {

namespace {

// Field order of both layouts: protocol, firewall id, the address words, port, the zero pad.
enum : uint8_t { kProtoField, kFirewallField, kAddrField };
constexpr unsigned kFields4 = 5;
constexpr unsigned kFields6 = 8;

RTE_ACL_RULE_DEF(AclRule4, kFields4);
RTE_ACL_RULE_DEF(AclRule6, kFields6);

rte_acl_field_def field(uint8_t type, uint8_t size, uint8_t index, uint8_t input, uint32_t offset) {
    rte_acl_field_def d{};
    d.type = type;
    d.size = size;
    d.field_index = index;
    d.input_index = input;
    d.offset = offset;
    return d;
}

// The field definitions for a key whose address is `addr_words` four-byte words at offsetof(dst).
rte_acl_config config_for(unsigned addr_words, uint32_t addr_offset, uint32_t port_offset) {
    rte_acl_config cfg{};
    cfg.num_categories = 1;
    cfg.max_size = 0;  // no limit: the control thread builds, and fails loudly if memory runs out
    unsigned n = 0;
    cfg.defs[n++] = field(RTE_ACL_FIELD_TYPE_BITMASK, 1, kProtoField, 0, 0);
    cfg.defs[n++] = field(RTE_ACL_FIELD_TYPE_MASK, 4, kFirewallField, 1, 4);
    for (unsigned w = 0; w < addr_words; ++w)
        cfg.defs[n++] = field(RTE_ACL_FIELD_TYPE_MASK, 4, static_cast<uint8_t>(kAddrField + w),
                              static_cast<uint8_t>(2 + w), addr_offset + 4 * w);
    const auto port_input = static_cast<uint8_t>(2 + addr_words);
    cfg.defs[n++] =
        field(RTE_ACL_FIELD_TYPE_RANGE, 2, static_cast<uint8_t>(kAddrField + addr_words), port_input, port_offset);
    cfg.defs[n++] = field(RTE_ACL_FIELD_TYPE_RANGE, 2, static_cast<uint8_t>(kAddrField + addr_words + 1), port_input,
                          port_offset + 2);
    cfg.num_fields = n;
    return cfg;
}

template <typename Rule>
void fill(Rule& r, const FirewallAclRule& in, unsigned addr_words) {
    std::memset(&r, 0, sizeof r);
    r.data.category_mask = 1;
    r.data.priority = static_cast<int32_t>(RTE_ACL_MAX_PRIORITY - in.rule_index);
    r.data.userdata = firewall_result(in.rule_index, in.deny);
    r.field[kProtoField].value.u8 = in.protocol;
    r.field[kProtoField].mask_range.u8 = in.protocol == 0 ? 0 : 0xff;
    r.field[kFirewallField].value.u32 = in.firewall;
    r.field[kFirewallField].mask_range.u32 = 32;
    for (unsigned w = 0; w < addr_words; ++w) {
        uint32_t word;
        std::memcpy(&word, in.dst + 4 * w, 4);
        const int bits = static_cast<int>(in.prefix_len) - 32 * static_cast<int>(w);
        r.field[kAddrField + w].value.u32 = __builtin_bswap32(word);  // rules are in host order
        r.field[kAddrField + w].mask_range.u32 = static_cast<uint32_t>(bits < 0 ? 0 : bits > 32 ? 32 : bits);
    }
    r.field[kAddrField + addr_words].value.u16 = in.port_min;
    r.field[kAddrField + addr_words].mask_range.u16 = in.port_max;
    r.field[kAddrField + addr_words + 1].value.u16 = 0;
    r.field[kAddrField + addr_words + 1].mask_range.u16 = 0xffff;
}

// One context for one family; nullptr with *error set on failure. A family without rules has no
// context (rte_acl cannot build an empty one), which classify treats as "no match".
template <typename Rule>
rte_acl_ctx* make_context(const std::vector<Rule>& rules, const rte_acl_config& cfg, const char* family,
                          uint32_t version, std::string* error) {
    if (rules.empty()) return nullptr;
    // rte_acl_create() hands back an existing context of the same name, so every context gets a
    // name no other one in the process has had.
    static std::atomic<uint32_t> serial{0};
    char name[RTE_ACL_NAMESIZE];
    std::snprintf(name, sizeof name, "egwfw%s-%u-%u", family, version, serial.fetch_add(1));
    rte_acl_param param{};
    param.name = name;
    param.socket_id = SOCKET_ID_ANY;
    param.rule_size = RTE_ACL_RULE_SZ(cfg.num_fields);
    param.max_rule_num = static_cast<uint32_t>(rules.size());
    rte_acl_ctx* ctx = rte_acl_create(&param);
    if (ctx == nullptr) {
        *error = std::string("EgressFirewall ") + family + ": rte_acl_create: " + rte_strerror(rte_errno);
        return nullptr;
    }
    int rc = rte_acl_add_rules(ctx, reinterpret_cast<const rte_acl_rule*>(rules.data()),
                               static_cast<uint32_t>(rules.size()));
    if (rc == 0) rc = rte_acl_build(ctx, &cfg);
    if (rc != 0) {
        *error = std::string("EgressFirewall ") + family + ": building " + std::to_string(rules.size()) +
                 " ACL rules: " + rte_strerror(-rc);
        rte_acl_free(ctx);
        return nullptr;
    }
    return ctx;
}

}  // namespace

std::unique_ptr<EgressFirewallTable> EgressFirewallTable::build(const FirewallAclRule* rules, size_t n,
                                                                uint32_t version, std::string* error) {
    std::vector<AclRule4> rules4;
    std::vector<AclRule6> rules6;
    for (size_t i = 0; i < n; ++i) {
        const FirewallAclRule& r = rules[i];
        if (r.rule_index >= kMaxFirewallRuleIndex || r.prefix_len > (r.v6 ? 128 : 32) || r.port_min > r.port_max) {
            *error = "EgressFirewall: ACL rule " + std::to_string(i) + " (firewall " + std::to_string(r.firewall) +
                     ", rule " + std::to_string(r.rule_index) + ") is out of range";
            return nullptr;
        }
        if (r.v6)
            fill(rules6.emplace_back(), r, 4);
        else
            fill(rules4.emplace_back(), r, 1);
    }
    std::unique_ptr<EgressFirewallTable> t(new EgressFirewallTable);
    t->version_ = version;
    t->rules4_ = rules4.size();
    t->rules6_ = rules6.size();
    error->clear();
    t->ctx4_ = make_context(rules4, config_for(1, offsetof(FirewallKey4, dst_be), offsetof(FirewallKey4, dst_port_be)),
                            "4", version, error);
    if (!error->empty()) return nullptr;
    t->ctx6_ = make_context(rules6, config_for(4, offsetof(FirewallKey6, dst), offsetof(FirewallKey6, dst_port_be)),
                            "6", version, error);
    if (!error->empty()) return nullptr;
    return t;
}

EgressFirewallTable::~EgressFirewallTable() {
    rte_acl_free(ctx4_);
    rte_acl_free(ctx6_);
}

void EgressFirewallTable::classify4(const FirewallKey4* const* keys, uint32_t* results, uint32_t n) const {
    if (ctx4_ == nullptr) {
        std::memset(results, 0, sizeof(uint32_t) * n);
        return;
    }
    rte_acl_classify(ctx4_, const_cast<const uint8_t**>(reinterpret_cast<const uint8_t* const*>(keys)), results, n, 1);
}

void EgressFirewallTable::classify6(const FirewallKey6* const* keys, uint32_t* results, uint32_t n) const {
    if (ctx6_ == nullptr) {
        std::memset(results, 0, sizeof(uint32_t) * n);
        return;
    }
    rte_acl_classify(ctx6_, const_cast<const uint8_t**>(reinterpret_cast<const uint8_t* const*>(keys)), results, n, 1);
}

}  // namespace egw::dp
