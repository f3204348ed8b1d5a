// SPDX-License-Identifier: Apache-2.0
//
// Keeps exact DNS names resolved for EgressFirewall's dnsName rules, with c-ares.
//
// The owner says which names it wants (set_names) and reads what they resolve to (snapshot), and
// watches generation() to learn that some name's set of addresses changed. Neither call waits for
// the network: the queries run on the resolver's own thread, which owns the c-ares channel (a
// channel is not safe to share between threads in c-ares 1.18) and sleeps in poll() on its
// sockets, an eventfd for the owner's wake-ups, and the next re-query or expiry. An own thread
// rather than the control loop's: a slow or dead server never delays a policy publication, and
// re-queries fall due on time whatever the control loop is busy with.
//
// Each name is asked for A and AAAA, independently, and re-asked by the rules of name_table.h
// (TTL floor and ceiling, addresses held through a failed re-query until they expire, NXDOMAIN is
// an answer with no addresses). Every state change of a name's A or AAAA lookup is logged once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "control/dns/name_table.h"

namespace egw::dns {

struct ResolverOptions {
    // The servers to ask, each "address" or "address:port" ("[v6]:port" for IPv6), in order.
    // Empty: the nameservers of /etc/resolv.conf, as c-ares reads them.
    std::vector<std::string> servers;
    TtlPolicy ttl;
    std::chrono::milliseconds query_timeout{2000};  // per try, before the next server or try
    int tries = 2;
};

class Resolver {
public:
    // Starts the thread. Throws std::runtime_error when c-ares cannot start or refuses a server.
    explicit Resolver(ResolverOptions options);
    ~Resolver();  // stops the thread; queries in flight are abandoned
    Resolver(const Resolver&) = delete;
    Resolver& operator=(const Resolver&) = delete;

    // The exact names wanted (no wildcards: dns_name_resolver.h reads those). New names are asked
    // at once; names left out are forgotten.
    void set_names(const std::vector<std::string>& names);

    // Moves on whenever a wanted name's set of addresses changes (a new answer, an expiry, a
    // forgotten name that had addresses).
    uint64_t generation() const;
    // Every wanted name, with its addresses and their expiry.
    Snapshot snapshot() const;
    // Waits until generation() differs from `seen` or `timeout` passes; returns generation().
    uint64_t wait_for_change(uint64_t seen, std::chrono::milliseconds timeout) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace egw::dns
