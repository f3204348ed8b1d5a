// SPDX-License-Identifier: Apache-2.0
//
// Steering replies to the worker that owns their session (docs/architecture.md, "Ownership and
// steering"). A reply's NAT destination port (for ICMP echo replies, the identifier) lies in the
// block of one worker, and worker w polls receive queue w of every port, so one rte_flow rule per
// NAT address, protocol and masked piece of a worker's block sends the reply straight to its
// owner's queue. Where a device refuses the rules (every virtual device) the port stays on the
// software hand-off, which is always there behind the rules anyway.
//
// The rules are made by pure functions (testable without a NIC, and printed in testpmd's
// `flow create` syntax for checking on one); Steering applies them to the outside ports.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

struct rte_flow;

namespace egw::control {

// Matches a 16-bit port p when (p & mask) == value.
struct PortMatch {
    uint16_t value = 0;
    uint16_t mask = 0;
    bool operator==(const PortMatch&) const = default;
};

// The fewest disjoint masked matches that together match exactly the ports lo..hi (lo <= hi).
std::vector<PortMatch> split_port_range(uint16_t lo, uint16_t hi);

enum class SteeredProto : uint8_t { tcp, udp, icmp };
const char* to_string(SteeredProto p);

struct PortBlock {
    uint16_t lo = 0;  // inclusive
    uint16_t hi = 0;
};

struct SteeringRule {
    uint32_t nat_ip = 0;  // host order
    SteeredProto proto = SteeredProto::tcp;
    PortMatch port;      // TCP/UDP destination port; ICMP echo-reply identifier
    uint16_t queue = 0;  // the owning worker's receive queue (= its index)
    bool operator==(const SteeringRule&) const = default;
};

// A Service port on a NAT address that is also the Service's ingress IP. The allocator never
// gives it out as a NAT port, so a packet to it is ingress, never a reply: no rule matches it,
// and the device's RSS spreads such connections over the workers as it does any other traffic.
struct ServicePort {
    SteeredProto proto = SteeredProto::tcp;  // tcp or udp
    uint16_t port = 0;
    auto operator<=>(const ServicePort&) const = default;
};
using ServicePorts = std::vector<ServicePort>;  // sorted, no duplicates

// Every rule for one NAT address: for each protocol, each worker's block (blocks[w] is worker
// w's) less the address's Service ports of that protocol, cut by split_port_range, in that order.
std::vector<SteeringRule> steering_rules(uint32_t nat_ip, const std::vector<PortBlock>& blocks,
                                         const ServicePorts& service_ports = {});

// The rule in testpmd's syntax, for DPDK port `port_id`:
//   flow create 2 ingress pattern eth / ipv4 dst is 192.0.2.50 / tcp dst spec 32768 dst mask 0xc000 / end
//   actions queue index 1 / end
std::string testpmd_flow_create(uint16_t port_id, const SteeringRule& r);

// Applies the rules to the outside ports and keeps them in step with the NAT addresses. Control
// thread only; the ports must be started.
class Steering {
public:
    enum class Mode : uint8_t { rte_flow, software };

    struct Port {
        uint16_t id = 0;
        std::string name;
        Mode mode = Mode::software;
        std::string reason;                                // why software; empty under rte_flow
        bool icmp = true;                                  // ICMP echo replies steered too
        std::map<uint32_t, std::vector<rte_flow*>> flows;  // per NAT address (host order)
    };

    Steering() = default;
    ~Steering();
    Steering(const Steering&) = delete;
    Steering& operator=(const Steering&) = delete;

    // `ports` are the outside ports (DPDK id, name, receive queues); `blocks` the workers' blocks.
    struct OutsidePort {
        uint16_t id;
        std::string name;
        uint16_t rx_queues;
    };
    // Installs the rules of the NAT addresses update() was given before.
    void init(const std::vector<OutsidePort>& ports, const std::vector<PortBlock>& blocks);

    // Makes the rules match `targets` (NAT address, host order -> its Service ports): creates
    // those of new addresses, destroys those of removed ones, and remakes those of an address
    // whose Service ports changed (its replies take the software hand-off meanwhile). A port
    // whose device refuses a rule goes to software mode for good, with one log line, and its
    // rules are destroyed.
    void update(const std::map<uint32_t, ServicePorts>& targets);
    // The same for addresses without Service ports.
    void update(const std::vector<uint32_t>& nat_ips);

    // Destroys every rule (before the ports stop).
    void clear();

    const std::vector<Port>& ports() const { return ports_; }
    const std::vector<PortBlock>& blocks() const { return blocks_; }
    // The rules in force (or that would be, for a port in software mode) of one NAT address.
    std::vector<SteeringRule> rules_of(uint32_t nat_ip) const;
    std::vector<uint32_t> nat_ips() const;

private:
    bool install(Port& p, uint32_t nat_ip);
    void fall_back(Port& p, const std::string& why);
    void destroy(Port& p, uint32_t nat_ip);

    std::vector<Port> ports_;
    std::vector<PortBlock> blocks_;
    std::map<uint32_t, ServicePorts> targets_;
};

const char* to_string(Steering::Mode m);

}  // namespace egw::control
