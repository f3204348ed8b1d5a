// SPDX-License-Identifier: Apache-2.0
//
// The resolver (control/dns/resolver.h) against a real DNS server: dnsmasq, in a network namespace
// of this test's own (loopback only, nothing leaves it), answering from a hosts file the test
// rewrites (SIGHUP makes dnsmasq read it again) with a TTL of 2 seconds. Needs root for the
// namespace, like the end-to-end tests. Also run under ThreadSanitizer by scripts/test.sh.
//
// Waits are bounded by deadlines far above what the rules need, so a slow machine makes the test
// slower, not wrong; the assertions are about what the resolver reported, and only the "new
// address within TTL + slack" one measures time (with a slack of 10 seconds).
#include "control/dns/resolver.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

namespace {

using namespace egw::dns;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using egw::net::IpAddr;

constexpr auto kTtl = 2s;        // dnsmasq's --local-ttl
constexpr auto kDeadline = 30s;  // for anything that should take a few TTLs
constexpr const char* kServer = "127.0.0.1:5353";

IpAddr ip(const char* s) {
    return *egw::net::parse_ip(s);
}

// Moves this process into a new network namespace with its loopback up.
void private_loopback() {
    ASSERT_EQ(unshare(CLONE_NEWNET), 0) << "unshare(CLONE_NEWNET): " << std::strerror(errno) << " (needs root)";
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(fd, 0);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    ASSERT_EQ(ioctl(fd, SIOCGIFFLAGS, &ifr), 0);
    ifr.ifr_flags |= IFF_UP;
    ASSERT_EQ(ioctl(fd, SIOCSIFFLAGS, &ifr), 0);
    close(fd);
}

std::vector<IpAddr> addresses_of(const NameStatus& s) {
    std::vector<IpAddr> out;
    for (const ResolvedAddress& a : s.addresses)
        out.push_back(a.address);
    return out;
}

class ResolverAgainstDnsmasq : public ::testing::Test {
protected:
    static void SetUpTestSuite() { private_loopback(); }

    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("egw-dns-resolver-" + std::to_string(getpid()));
        fs::create_directories(dir_);
        write_hosts("10.1.0.1 web.test\n10.1.0.2 web.test\nfd00::1 web.test\n10.1.0.3 v4only.test\n");
        start_dnsmasq();
    }

    void TearDown() override {
        stop_dnsmasq();
        fs::remove_all(dir_);
    }

    void write_hosts(const std::string& text) {
        std::ofstream f(dir_ / "hosts.tmp");
        f << text;
        f.close();
        fs::rename(dir_ / "hosts.tmp", dir_ / "hosts");
    }

    void start_dnsmasq() {
        const std::string hosts = "--addn-hosts=" + (dir_ / "hosts").string();
        const std::string pid_file = "--pid-file=" + (dir_ / "dnsmasq.pid").string();
        const std::string ttl = "--local-ttl=" + std::to_string(kTtl.count());
        std::vector<std::string> args = {"dnsmasq",
                                         "--keep-in-foreground",
                                         "--conf-file=/dev/null",
                                         "--no-resolv",
                                         "--no-hosts",
                                         hosts,
                                         ttl,
                                         "--listen-address=127.0.0.1",
                                         "--bind-interfaces",
                                         "--port=5353",
                                         "--local=/test/",
                                         "--user=root",
                                         pid_file,
                                         "--log-facility=" + (dir_ / "dnsmasq.log").string()};
        std::vector<char*> argv;
        for (auto& a : args)
            argv.push_back(a.data());
        argv.push_back(nullptr);
        // dnsmasq drops capabilities, which clears a parent-death signal, so a watchdog (a fork
        // of this process, before any resolver thread exists) holds one instead: when this test
        // process dies (a sanitizer's halt_on_error, a crash) the watchdog stops dnsmasq rather
        // than leave it serving. The test signals the watchdog, which passes SIGHUP and SIGTERM on.
        const pid_t parent = getpid();
        dnsmasq_ = fork();
        ASSERT_GE(dnsmasq_, 0) << std::strerror(errno);
        if (dnsmasq_ == 0) run_watchdog(parent, argv.data());
        // Serving once it answers: the resolver would also just retry, but a test that starts
        // asking before the server listens would measure the retry, not the rule.
        Resolver probe(options());
        probe.set_names({"v4only.test"});
        ASSERT_TRUE(wait_until(probe, [](const Snapshot& s) { return s.at("v4only.test").a == LookupState::resolved; }))
            << "dnsmasq did not answer (dnsmasq-base installed?)";
    }

    [[noreturn]] static void run_watchdog(pid_t parent, char** argv) {
        sigset_t set;
        sigemptyset(&set);
        for (int sig : {SIGTERM, SIGHUP, SIGCHLD})
            sigaddset(&set, sig);
        sigprocmask(SIG_BLOCK, &set, nullptr);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1);  // the test is already gone
        const pid_t server = fork();
        if (server == 0) {
            sigprocmask(SIG_UNBLOCK, &set, nullptr);
            execvp("dnsmasq", argv);
            _exit(127);
        }
        while (true) {
            int sig = 0;
            sigwait(&set, &sig);
            if (sig == SIGHUP) {
                kill(server, SIGHUP);
            } else if (sig == SIGTERM) {
                kill(server, SIGTERM);
                waitpid(server, nullptr, 0);
                _exit(0);
            } else if (waitpid(server, nullptr, WNOHANG) == server) {
                _exit(1);  // dnsmasq ended by itself
            }
        }
    }

    void stop_dnsmasq() {
        if (dnsmasq_ <= 0) return;
        kill(dnsmasq_, SIGTERM);
        int status = 0;
        waitpid(dnsmasq_, &status, 0);
        dnsmasq_ = 0;
    }

    void reload_dnsmasq() { ASSERT_EQ(kill(dnsmasq_, SIGHUP), 0); }

    static ResolverOptions options() {
        ResolverOptions o;
        o.servers = {kServer};
        o.ttl.floor = 1s;
        o.ttl.ceiling = 60s;
        o.ttl.negative = 1s;
        o.ttl.retry_first = 1s;
        o.ttl.retry_max = 2s;
        o.query_timeout = 500ms;
        o.tries = 1;
        return o;
    }

    // Polls the snapshot after every change (and at least every 100 ms) until `done` holds.
    static bool wait_until(const Resolver& r, const std::function<bool(const Snapshot&)>& done,
                           std::chrono::seconds limit = kDeadline) {
        const auto end = Clock::now() + limit;
        uint64_t seen = r.generation();
        while (Clock::now() < end) {
            if (done(r.snapshot())) return true;
            seen = r.wait_for_change(seen, 100ms);
        }
        return done(r.snapshot());
    }

    fs::path dir_;
    pid_t dnsmasq_ = 0;  // the watchdog of dnsmasq (start_dnsmasq)
};

TEST_F(ResolverAgainstDnsmasq, ResolvesANameToItsAAndAaaaAnswers) {
    Resolver r(options());
    const uint64_t before = r.generation();
    r.set_names({"web.test", "v4only.test"});
    ASSERT_TRUE(wait_until(r, [](const Snapshot& s) {
        return s.at("web.test").a == LookupState::resolved && s.at("web.test").aaaa == LookupState::resolved &&
               s.at("v4only.test").a == LookupState::resolved && s.at("v4only.test").aaaa == LookupState::no_records;
    }));
    const Clock::time_point now = Clock::now();
    const Snapshot s = r.snapshot();
    EXPECT_EQ(addresses_of(s.at("web.test")), (std::vector<IpAddr>{ip("10.1.0.1"), ip("10.1.0.2"), ip("fd00::1")}));
    EXPECT_EQ(addresses_of(s.at("v4only.test")), std::vector<IpAddr>{ip("10.1.0.3")});
    EXPECT_EQ(s.at("web.test").error, "");
    // Held for two TTLs after the answer (name_table.h), never longer.
    for (const ResolvedAddress& a : s.at("web.test").addresses)
        EXPECT_LE(a.expires, now + 2 * kTtl);
    EXPECT_NE(r.generation(), before);
}

TEST_F(ResolverAgainstDnsmasq, ReportsAChangedAnswerWithinTheTtl) {
    Resolver r(options());
    r.set_names({"web.test"});
    ASSERT_TRUE(wait_until(r, [](const Snapshot& s) { return s.at("web.test").addresses.size() == 3; }));

    write_hosts("10.1.0.9 web.test\nfd00::9 web.test\n");
    reload_dnsmasq();
    const Clock::time_point changed = Clock::now();
    ASSERT_TRUE(
        wait_until(r,
                   [](const Snapshot& s) {
                       return addresses_of(s.at("web.test")) == std::vector<IpAddr>{ip("10.1.0.9"), ip("fd00::9")};
                   }))
        << "still " << r.snapshot().at("web.test").addresses.size() << " addresses";
    EXPECT_LT(Clock::now() - changed, kTtl + 10s);
    const Snapshot s = r.snapshot();
    EXPECT_EQ(s.at("web.test").a, LookupState::resolved);
    EXPECT_EQ(s.at("web.test").aaaa, LookupState::resolved);
}

TEST_F(ResolverAgainstDnsmasq, ServerGoneKeepsTheLastAddressesUntilTheyExpireThenNone) {
    Resolver r(options());
    r.set_names({"web.test"});
    ASSERT_TRUE(wait_until(r, [](const Snapshot& s) { return s.at("web.test").addresses.size() == 3; }));
    stop_dnsmasq();
    // The latest expiry of any address known before the server went away.
    Clock::time_point last_expiry{};
    const Snapshot before = r.snapshot();
    for (const ResolvedAddress& a : before.at("web.test").addresses)
        last_expiry = std::max(last_expiry, a.expires);

    bool saw_failing = false;
    bool dropped_early = false;
    const bool emptied = wait_until(r, [&](const Snapshot& s) {
        const NameStatus& n = s.at("web.test");
        if (n.a == LookupState::failing || n.aaaa == LookupState::failing) saw_failing = true;
        // Addresses from before the stop may go only at their expiry, never before.
        if (n.addresses.empty() && Clock::now() < last_expiry) dropped_early = true;
        return n.addresses.empty();
    });
    ASSERT_TRUE(emptied) << "the addresses were never dropped";
    EXPECT_TRUE(saw_failing);
    EXPECT_FALSE(dropped_early);
    const NameStatus n = r.snapshot().at("web.test");
    EXPECT_EQ(n.a, LookupState::failing);
    EXPECT_EQ(n.aaaa, LookupState::failing);
    EXPECT_NE(n.error, "");
}

TEST_F(ResolverAgainstDnsmasq, NxdomainResolvesToNone) {
    Resolver r(options());
    r.set_names({"missing.test", "web.test"});
    ASSERT_TRUE(wait_until(r, [](const Snapshot& s) {
        return s.at("missing.test").a == LookupState::no_records &&
               s.at("missing.test").aaaa == LookupState::no_records && s.at("web.test").addresses.size() == 3;
    }));
    EXPECT_TRUE(r.snapshot().at("missing.test").addresses.empty());
    EXPECT_EQ(r.snapshot().at("missing.test").error, "");

    // A name that goes away in DNS is gone at the next answer, not kept like a failure.
    write_hosts("10.1.0.3 v4only.test\n");
    reload_dnsmasq();
    ASSERT_TRUE(wait_until(r, [](const Snapshot& s) {
        const NameStatus& n = s.at("web.test");
        return n.a == LookupState::no_records && n.aaaa == LookupState::no_records;
    }));
    EXPECT_TRUE(r.snapshot().at("web.test").addresses.empty());
}

TEST_F(ResolverAgainstDnsmasq, AServerThatNeverAnswersBlocksNobody) {
    // A UDP socket nobody reads: queries to it time out.
    int sink = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(sink, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(5354);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(sink, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);

    ResolverOptions o = options();
    o.servers = {"127.0.0.1:5354"};
    o.query_timeout = 1000ms;
    Resolver r(o);
    r.set_names({"web.test"});
    const NameStatus first = r.snapshot().at("web.test");
    EXPECT_TRUE(first.addresses.empty());
    ASSERT_TRUE(wait_until(r, [](const Snapshot& s) {
        return s.at("web.test").a == LookupState::failing && s.at("web.test").aaaa == LookupState::failing;
    }));
    EXPECT_NE(r.snapshot().at("web.test").error, "");
    // Another name next to the dead one is still answered by a live server: not here (one server),
    // but set_names and snapshot keep returning while queries hang.
    r.set_names({"web.test", "other.test"});
    EXPECT_EQ(r.snapshot().size(), 2u);
    close(sink);
}

TEST(ResolverOptions, RefusesABadServer) {
    ResolverOptions o;
    o.servers = {"not-an-address"};
    EXPECT_THROW(Resolver r(o), std::runtime_error);
}

}  // namespace
