// SPDX-License-Identifier: Apache-2.0
//
// EgressFirewallTable: every namespace's EgressFirewall rules as two DPDK rte_acl contexts (one
// per address family), classifying a burst of flows by (firewall id, protocol, destination
// address, destination port) in one call (docs/kubernetes.md, "EgressFirewall").
//
// Writer: the control thread expands the rules (names and node selectors already turned into
// addresses, control/firewall/acl_rules.h) and calls build(), which allocates and compiles both
// contexts; allocation and rte_errno are fine there. A built table is never modified: a rule
// change, or a name resolving to new addresses, is a new table for a new policy version.
// Readers: workers, through classify4()/classify6() on a burst, from the table of the snapshot
// they loaded for the current poll-loop iteration (the NAT slow path, at session creation).
// Publication and reclamation: the table rides in the policy snapshot that points at it and is
// destroyed with that snapshot, after the RCU grace period that frees it (policy.h); the
// destructor frees the contexts (rte_acl_free). EgressFirewallPolicy below carries it there, with
// the pods it applies to and the hit counters.
//
// Priorities: rte_acl returns the highest-priority match, so rule i of a namespace gets
// RTE_ACL_MAX_PRIORITY - i and the first rule wins; the firewall id is an exact field, so
// namespaces never see each other's rules. One model rule may expand into several ACL rules (one
// per address and port); they share its priority and result, so which of them matches does not
// matter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/tables/flat_map.h"
#include "dataplane/tables/ip6_map.h"

struct rte_acl_ctx;

namespace egw::dp {

// One ACL rule, as the control thread expands it from a namespace's rule list.
struct FirewallAclRule {
    uint32_t firewall = 0;    // the namespace's firewall id, from 1 (0 is "no EgressFirewall")
    uint32_t rule_index = 0;  // position in the namespace's spec.egress, below kMaxFirewallRuleIndex
    bool deny = false;
    bool v6 = false;
    uint8_t protocol = 0;  // 0: any protocol (the rule has no ports)
    uint8_t prefix_len = 0;
    uint16_t port_min = 0;  // destination port range, host order; 0-65535 for "any"
    uint16_t port_max = 65535;
    uint8_t dst[16] = {};  // network order; an IPv4 address in the first four bytes
};

inline constexpr uint32_t kMaxFirewallRuleIndex = 1u << 20;

// The classifier's input for one IPv4 flow, in network order as rte_acl reads it. The layout
// follows rte_acl's: the first field one byte, the rest in groups of four bytes.
struct FirewallKey4 {
    uint8_t protocol;
    uint8_t pad0[3];
    uint32_t firewall_be;
    uint32_t dst_be;
    uint16_t dst_port_be;
    uint16_t zero;  // completes the last four-byte group; always 0
};
static_assert(sizeof(FirewallKey4) == 16);

struct FirewallKey6 {
    uint8_t protocol;
    uint8_t pad0[3];
    uint32_t firewall_be;
    uint8_t dst[16];
    uint16_t dst_port_be;
    uint16_t zero;
};
static_assert(sizeof(FirewallKey6) == 28);

// A classification result: 0 when no rule matched (default allow), else the deciding rule.
inline bool firewall_matched(uint32_t result) {
    return result != 0;
}
inline bool firewall_denies(uint32_t result) {
    return (result & 1) != 0;
}
inline uint32_t firewall_rule_index(uint32_t result) {
    return (result >> 1) - 1;
}
inline uint32_t firewall_result(uint32_t rule_index, bool deny) {
    return (rule_index + 1) << 1 | (deny ? 1u : 0u);
}

class EgressFirewallTable {
public:
    // Compiles the rules into a table for policy `version`. On failure returns nullptr and says
    // why in *error, which must not be null (a rule out of range, or rte_acl's own error for a
    // context it cannot make). Control thread only: it allocates.
    static std::unique_ptr<EgressFirewallTable> build(const FirewallAclRule* rules, size_t n, uint32_t version,
                                                      std::string* error);
    ~EgressFirewallTable();
    EgressFirewallTable(const EgressFirewallTable&) = delete;
    EgressFirewallTable& operator=(const EgressFirewallTable&) = delete;

    uint32_t version() const { return version_; }
    size_t rules4() const { return rules4_; }  // ACL rules after expansion, per family
    size_t rules6() const { return rules6_; }

    // results[i] = the result for keys[i] (see firewall_matched()). A family with no rules
    // classifies every key as no match without touching rte_acl.
    void classify4(const FirewallKey4* const* keys, uint32_t* results, uint32_t n) const;
    void classify6(const FirewallKey6* const* keys, uint32_t* results, uint32_t n) const;

private:
    EgressFirewallTable() = default;

    uint32_t version_ = 0;
    size_t rules4_ = 0;
    size_t rules6_ = 0;
    rte_acl_ctx* ctx4_ = nullptr;
    rte_acl_ctx* ctx6_ = nullptr;
};

// Everything the workers read of the EgressFirewalls, published with the policy snapshot
// (PolicySnapshot::egress_firewall) and built on the control thread (control/firewall/compile.h).
// Read in the NAT slow path only: a pod's new flow is classified when its address is in `pods` or
// `pods6`; an established session never looks here (the maintenance sweep does, once per version).
// Immutable once published, but for the hit counters: each worker writes its own row with count()
// and the control thread reads them relaxed. Snapshots that share a version share this object
// (std::shared_ptr, released on the control thread only, after the grace period of the last
// snapshot that held it).
struct EgressFirewallPolicy {
    uint32_t version = 0;      // changes with every new build: the workers' sweep starts over on a change
    bool reject_icmp = false;  // denied flows answered with administratively prohibited, not dropped
    std::unique_ptr<EgressFirewallTable> table;
    FlatMap pods;  // pod IPv4 (host order) -> firewall id
    Ip6Map pods6;  // pod IPv6 -> firewall id
    // Hits: slot slot_base[id] + rule index for a rule's, slot_base[id] + rule_count[id] for the
    // flows no rule of firewall `id` matched (allowed by default). One row of `stride` slots per
    // worker, rows a whole number of cache lines apart so that no two workers write one line.
    std::vector<uint32_t> slot_base;   // by firewall id (index 0 unused)
    std::vector<uint32_t> rule_count;  // by firewall id
    uint32_t stride = 0;
    unsigned workers = 0;
    struct alignas(64) HitLine {
        uint64_t slot[8];
    };
    std::unique_ptr<HitLine[]> hit_lines;

    // Sizes the hit rows for `n_workers` and the firewalls' rule counts (rule_count filled).
    void size_hits(unsigned n_workers) {
        slot_base.assign(rule_count.size(), 0);
        uint32_t next = 0;
        for (size_t id = 1; id < rule_count.size(); ++id) {
            slot_base[id] = next;
            next += rule_count[id] + 1;
        }
        stride = (next + 7) / 8 * 8;
        workers = n_workers;
        const size_t lines = size_t{stride} / 8 * n_workers;
        hit_lines.reset(new HitLine[lines ? lines : 1]());
    }
    uint64_t* hits_of(unsigned worker) const {
        return reinterpret_cast<uint64_t*>(hit_lines.get()) + size_t{stride} * worker;
    }
    // The slot of a classification result for firewall `id`.
    uint32_t slot_of(uint32_t id, uint32_t result) const {
        return slot_base[id] + (firewall_matched(result) ? firewall_rule_index(result) : rule_count[id]);
    }
    // Summed over the workers (control thread; relaxed loads of the workers' counters).
    uint64_t hits(uint32_t slot) const {
        uint64_t sum = 0;
        for (unsigned w = 0; w < workers; ++w)
            sum += __atomic_load_n(hits_of(w) + slot, __ATOMIC_RELAXED);
        return sum;
    }
};

}  // namespace egw::dp
