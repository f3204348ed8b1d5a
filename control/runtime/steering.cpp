// SPDX-License-Identifier: Apache-2.0
#include "control/runtime/steering.h"

#include <rte_byteorder.h>
#include <rte_errno.h>
#include <rte_flow.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "config/config.h"

namespace egw::control {

std::vector<PortMatch> split_port_range(uint16_t lo, uint16_t hi) {
    std::vector<PortMatch> out;
    uint32_t at = lo, end = uint32_t{hi} + 1;
    while (at < end) {
        // The largest aligned power-of-two block that starts at `at` and stays inside the range.
        uint32_t size = at == 0 ? 0x10000 : (at & (~at + 1));
        while (at + size > end)
            size >>= 1;
        out.push_back(PortMatch{static_cast<uint16_t>(at), static_cast<uint16_t>(~(size - 1) & 0xffff)});
        at += size;
    }
    return out;
}

const char* to_string(SteeredProto p) {
    switch (p) {
    case SteeredProto::tcp:
        return "tcp";
    case SteeredProto::udp:
        return "udp";
    case SteeredProto::icmp:
        return "icmp";
    }
    return "?";
}

const char* to_string(Steering::Mode m) {
    return m == Steering::Mode::rte_flow ? "rte_flow" : "software";
}

std::vector<SteeringRule> steering_rules(uint32_t nat_ip, const std::vector<PortBlock>& blocks,
                                         const ServicePorts& service_ports) {
    std::vector<SteeringRule> out;
    for (SteeredProto proto : {SteeredProto::tcp, SteeredProto::udp, SteeredProto::icmp})
        for (size_t w = 0; w < blocks.size(); ++w) {
            // The block's ports in ascending runs between the Service ports that fall inside it.
            uint32_t from = blocks[w].lo;
            auto cut = [&](uint32_t to) {  // inclusive; nothing when the run is empty
                if (from <= to)
                    for (PortMatch m : split_port_range(static_cast<uint16_t>(from), static_cast<uint16_t>(to)))
                        out.push_back(SteeringRule{nat_ip, proto, m, static_cast<uint16_t>(w)});
            };
            for (const ServicePort& sp : service_ports) {
                if (sp.proto != proto || sp.port < blocks[w].lo || sp.port > blocks[w].hi) continue;
                cut(uint32_t{sp.port} - 1);
                from = uint32_t{sp.port} + 1;
            }
            cut(blocks[w].hi);
        }
    return out;
}

std::string testpmd_flow_create(uint16_t port_id, const SteeringRule& r) {
    char mask[8];
    std::snprintf(mask, sizeof mask, "0x%04x", r.port.mask);
    std::string v = std::to_string(r.port.value);
    std::string l4 = r.proto == SteeredProto::icmp
                         ? "icmp type is 0 ident spec " + v + " ident mask " + mask
                         : std::string(to_string(r.proto)) + " dst spec " + v + " dst mask " + mask;
    return "flow create " + std::to_string(port_id) + " ingress pattern eth / ipv4 dst is " +
           config::format_ipv4(r.nat_ip) + " / " + l4 + " / end actions queue index " + std::to_string(r.queue) +
           " / end";
}

namespace {

// One rte_flow rule's items and actions, built from a SteeringRule.
struct FlowSpec {
    rte_flow_attr attr{};
    rte_flow_item_ipv4 ip_spec{}, ip_mask{};
    rte_flow_item_tcp tcp_spec{}, tcp_mask{};
    rte_flow_item_udp udp_spec{}, udp_mask{};
    rte_flow_item_icmp icmp_spec{}, icmp_mask{};
    rte_flow_action_queue queue{};
    rte_flow_item pattern[4]{};
    rte_flow_action actions[2]{};

    explicit FlowSpec(const SteeringRule& r) {
        attr.ingress = 1;
        ip_spec.hdr.dst_addr = rte_cpu_to_be_32(r.nat_ip);
        ip_mask.hdr.dst_addr = 0xffffffff;
        pattern[0].type = RTE_FLOW_ITEM_TYPE_ETH;
        pattern[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
        pattern[1].spec = &ip_spec;
        pattern[1].mask = &ip_mask;
        uint16_t value = rte_cpu_to_be_16(r.port.value), mask = rte_cpu_to_be_16(r.port.mask);
        switch (r.proto) {
        case SteeredProto::tcp:
            tcp_spec.hdr.dst_port = value;
            tcp_mask.hdr.dst_port = mask;
            pattern[2] = rte_flow_item{RTE_FLOW_ITEM_TYPE_TCP, &tcp_spec, nullptr, &tcp_mask};
            break;
        case SteeredProto::udp:
            udp_spec.hdr.dst_port = value;
            udp_mask.hdr.dst_port = mask;
            pattern[2] = rte_flow_item{RTE_FLOW_ITEM_TYPE_UDP, &udp_spec, nullptr, &udp_mask};
            break;
        case SteeredProto::icmp:
            icmp_spec.hdr.icmp_type = 0;  // echo reply
            icmp_mask.hdr.icmp_type = 0xff;
            icmp_spec.hdr.icmp_ident = value;
            icmp_mask.hdr.icmp_ident = mask;
            pattern[2] = rte_flow_item{RTE_FLOW_ITEM_TYPE_ICMP, &icmp_spec, nullptr, &icmp_mask};
            break;
        }
        pattern[3].type = RTE_FLOW_ITEM_TYPE_END;
        queue.index = r.queue;
        actions[0] = rte_flow_action{RTE_FLOW_ACTION_TYPE_QUEUE, &queue};
        actions[1].type = RTE_FLOW_ACTION_TYPE_END;
    }
};

std::string flow_error(int rc, const rte_flow_error& e) {
    std::string what = e.message ? e.message : rte_strerror(rc < 0 ? -rc : rc);
    return what + " (type " + std::to_string(static_cast<int>(e.type)) + ")";
}

}  // namespace

Steering::~Steering() {
    clear();
}

void Steering::init(const std::vector<OutsidePort>& ports, const std::vector<PortBlock>& blocks) {
    clear();
    ports_.clear();
    blocks_ = blocks;
    for (const auto& op : ports) {
        Port p;
        p.id = op.id;
        p.name = op.name;
        if (blocks.size() < 2)
            p.reason = "one worker: every reply is its own";
        else if (op.rx_queues != blocks.size())
            p.reason = std::to_string(op.rx_queues) + " receive queue(s) for " + std::to_string(blocks.size()) +
                       " workers: queue w is not worker w's";
        else
            p.mode = Mode::rte_flow;
        ports_.push_back(std::move(p));
    }
    // Addresses given before the ports existed (the first policy is published before they start).
    std::map<uint32_t, ServicePorts> targets;
    targets.swap(targets_);
    update(targets);
}

std::vector<SteeringRule> Steering::rules_of(uint32_t nat_ip) const {
    auto it = targets_.find(nat_ip);
    return steering_rules(nat_ip, blocks_, it == targets_.end() ? ServicePorts{} : it->second);
}

std::vector<uint32_t> Steering::nat_ips() const {
    std::vector<uint32_t> out;
    for (const auto& [ip, ports] : targets_)
        out.push_back(ip);
    return out;
}

void Steering::fall_back(Port& p, const std::string& why) {
    for (auto it = p.flows.begin(); it != p.flows.end();)
        destroy(p, (it++)->first);
    p.mode = Mode::software;
    p.reason = why;
    spdlog::warn("port {}: replies are handed to their owner in software: {}", p.name, why);
}

void Steering::destroy(Port& p, uint32_t nat_ip) {
    auto it = p.flows.find(nat_ip);
    if (it == p.flows.end()) return;
    for (rte_flow* f : it->second) {
        rte_flow_error err{};
        if (int rc = rte_flow_destroy(p.id, f, &err); rc != 0)
            spdlog::warn("port {}: cannot destroy a steering rule of {}: {}", p.name, config::format_ipv4(nat_ip),
                         flow_error(rc, err));
    }
    p.flows.erase(it);
}

bool Steering::install(Port& p, uint32_t nat_ip) {
    std::vector<rte_flow*>& made = p.flows[nat_ip];
    for (const SteeringRule& r : rules_of(nat_ip)) {
        if (r.proto == SteeredProto::icmp && !p.icmp) continue;
        FlowSpec spec(r);
        rte_flow_error err{};
        int rc = rte_flow_validate(p.id, &spec.attr, spec.pattern, spec.actions, &err);
        rte_flow* f = nullptr;
        if (rc == 0) f = rte_flow_create(p.id, &spec.attr, spec.pattern, spec.actions, &err);
        if (f) {
            made.push_back(f);
            continue;
        }
        std::string why = (rc == 0 ? "rte_flow_create refused " : "rte_flow_validate refused ") +
                          testpmd_flow_create(p.id, r) + ": " + flow_error(rc == 0 ? -rte_errno : rc, err);
        if (r.proto == SteeredProto::icmp) {
            // TCP and UDP are steered; echo replies keep the software hand-off.
            p.icmp = false;
            spdlog::warn("port {}: ICMP echo replies are handed to their owner in software: {}", p.name, why);
            continue;
        }
        fall_back(p, why);
        return false;
    }
    return true;
}

void Steering::update(const std::vector<uint32_t>& nat_ips) {
    std::map<uint32_t, ServicePorts> targets;
    for (uint32_t ip : nat_ips)
        targets[ip];
    update(targets);
}

void Steering::update(const std::map<uint32_t, ServicePorts>& targets) {
    std::map<uint32_t, ServicePorts> old;
    old.swap(targets_);
    targets_ = targets;
    for (Port& p : ports_) {
        if (p.mode != Mode::rte_flow) continue;
        for (auto it = p.flows.begin(); it != p.flows.end();) {
            uint32_t ip = (it++)->first;
            auto now = targets_.find(ip), before = old.find(ip);
            if (now == targets_.end() || before == old.end() || now->second != before->second) destroy(p, ip);
        }
        for (const auto& [ip, ports] : targets_)
            if (!p.flows.count(ip) && !install(p, ip)) break;
    }
}

void Steering::clear() {
    for (Port& p : ports_)
        for (auto it = p.flows.begin(); it != p.flows.end();)
            destroy(p, (it++)->first);
}

}  // namespace egw::control
