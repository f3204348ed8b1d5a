// SPDX-License-Identifier: Apache-2.0
#include "control/dns/resolver.h"

#include <arpa/nameser.h>
#include <ares.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace egw::dns {

namespace {

// More addresses per record type than any name an EgressFirewall rule could sensibly name; the
// rest of a larger answer is not read.
constexpr int kMaxAnswers = 64;

void library_init() {
    static std::once_flag once;
    static int status = ARES_SUCCESS;
    std::call_once(once, [] { status = ares_library_init(ARES_LIB_INIT_ALL); });
    if (status != ARES_SUCCESS) throw std::runtime_error(std::string("c-ares: ") + ares_strerror(status));
}

void log_change(const StateChange& c) {
    const char* type = to_string(c.type);
    if (c.from == c.to) {
        spdlog::warn("dns: {} {}: the last addresses expired ({}); it resolves to none", c.name, type, c.error);
        return;
    }
    switch (c.to) {
    case LookupState::resolved:
        spdlog::info("dns: {} {}: resolved", c.name, type);
        break;
    case LookupState::no_records:
        spdlog::info("dns: {} {}: no such name or no {} records; it resolves to none", c.name, type, type);
        break;
    case LookupState::failing:
        spdlog::warn("dns: {} {}: query failed ({}); keeping {} address(es) until they expire, retrying", c.name, type,
                     c.error, c.addresses);
        break;
    case LookupState::pending:
        break;
    }
}

}  // namespace

struct Resolver::Impl {
    struct Query {
        Impl* self;
        std::string name;
        RecordType type;
    };

    explicit Impl(const ResolverOptions& o) : table(o.ttl) {
        library_init();
        ares_options opts{};
        opts.timeout = static_cast<int>(o.query_timeout.count());
        opts.tries = o.tries;
        int status = ares_init_options(&channel, &opts, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
        if (status != ARES_SUCCESS) throw std::runtime_error(std::string("c-ares: ") + ares_strerror(status));
        if (!o.servers.empty()) {
            std::string csv;
            for (const std::string& s : o.servers)
                csv += (csv.empty() ? "" : ",") + s;
            status = ares_set_servers_ports_csv(channel, csv.c_str());
            if (status != ARES_SUCCESS) {
                ares_destroy(channel);
                throw std::runtime_error("c-ares: the DNS servers \"" + csv + "\": " + ares_strerror(status));
            }
        }
        wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (wake_fd < 0) {
            ares_destroy(channel);
            throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
        }
        thread = std::thread([this] { run(); });
    }

    ~Impl() {
        stopping.store(true);
        wake();
        thread.join();
        ares_destroy(channel);  // calls the callbacks of queries in flight with ARES_EDESTRUCTION
        close(wake_fd);
    }

    void wake() const {
        const uint64_t one = 1;
        // Only fails when the counter is saturated, which still wakes the thread.
        [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof one);
    }

    // Called with `mutex` held.
    void changed() {
        generation.fetch_add(1);
        change_cv.notify_all();
    }

    static void on_reply(void* arg, int status, int /*timeouts*/, unsigned char* abuf, int alen) {
        std::unique_ptr<Query> q(static_cast<Query*>(arg));
        if (status == ARES_EDESTRUCTION) return;
        std::vector<Answer> answers;
        if (status == ARES_SUCCESS) {
            int n = kMaxAnswers;
            if (q->type == RecordType::a) {
                ares_addrttl ttls[kMaxAnswers];
                status = ares_parse_a_reply(abuf, alen, nullptr, ttls, &n);
                for (int i = 0; status == ARES_SUCCESS && i < n; ++i)
                    answers.push_back(
                        Answer{net::IpAddr::from_v4(ntohl(ttls[i].ipaddr.s_addr)), static_cast<uint32_t>(ttls[i].ttl)});
            } else {
                ares_addr6ttl ttls[kMaxAnswers];
                status = ares_parse_aaaa_reply(abuf, alen, nullptr, ttls, &n);
                for (int i = 0; status == ARES_SUCCESS && i < n; ++i)
                    answers.push_back(Answer{net::IpAddr::from_v6(ttls[i].ip6addr._S6_un._S6_u8),
                                             static_cast<uint32_t>(std::max(ttls[i].ttl, 0))});
            }
        }
        Impl& self = *q->self;
        std::lock_guard lock(self.mutex);
        bool moved = false;
        const Clock::time_point now = Clock::now();
        // NXDOMAIN (ENOTFOUND) and an answer without records of the type (ENODATA) are answers.
        if (status == ARES_SUCCESS || status == ARES_ENOTFOUND || status == ARES_ENODATA)
            moved =
                self.table.answered(q->name, q->type, status == ARES_SUCCESS ? answers : std::vector<Answer>{}, now);
        else
            moved = self.table.failed(q->name, q->type, ares_strerror(status), now);
        if (moved) self.changed();
    }

    void run() {
        std::vector<std::pair<std::string, RecordType>> due;
        std::vector<StateChange> log;
        while (!stopping.load()) {
            std::optional<Clock::time_point> deadline;
            {
                std::lock_guard lock(mutex);
                const Clock::time_point now = Clock::now();
                if (table.expire(now)) changed();
                due = table.take_due(now);
                log = table.take_changes();
                deadline = table.next_deadline();
            }
            for (const StateChange& c : log)
                log_change(c);
            for (auto& [name, type] : due) {
                auto* q = new Query{this, name, type};
                ares_query(channel, q->name.c_str(), ns_c_in, type == RecordType::a ? ns_t_a : ns_t_aaaa, on_reply, q);
            }
            if (!due.empty()) continue;  // a reply may have come synchronously (a bad name): look again

            pollfd fds[1 + ARES_GETSOCK_MAXNUM];
            fds[0] = pollfd{wake_fd, POLLIN, 0};
            ares_socket_t socks[ARES_GETSOCK_MAXNUM];
            const int bits = ares_getsock(channel, socks, ARES_GETSOCK_MAXNUM);
            nfds_t n = 1;
            for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
                short events = 0;
                if (ARES_GETSOCK_READABLE(bits, i)) events |= POLLIN;
                if (ARES_GETSOCK_WRITABLE(bits, i)) events |= POLLOUT;
                if (events) fds[n++] = pollfd{socks[i], events, 0};
            }
            int timeout_ms = -1;
            if (deadline) {
                auto wait = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
                timeout_ms = static_cast<int>(std::clamp<int64_t>(wait.count(), 0, 60'000));
            }
            timeval tv{};
            if (ares_timeout(channel, nullptr, &tv)) {
                const int ares_ms = static_cast<int>(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000);
                timeout_ms = timeout_ms < 0 ? ares_ms : std::min(timeout_ms, ares_ms);
            }
            if (::poll(fds, n, timeout_ms) < 0 && errno != EINTR) {
                spdlog::error("dns: poll: {}", std::strerror(errno));
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
            if (fds[0].revents & POLLIN) {
                uint64_t count = 0;
                [[maybe_unused]] ssize_t r = ::read(wake_fd, &count, sizeof count);
            }
            bool any = false;
            for (nfds_t i = 1; i < n; ++i) {
                if (!fds[i].revents) continue;
                any = true;
                const bool readable = fds[i].revents & (POLLIN | POLLERR | POLLHUP);
                const bool writable = fds[i].revents & POLLOUT;
                ares_process_fd(channel, readable ? fds[i].fd : ARES_SOCKET_BAD,
                                writable ? fds[i].fd : ARES_SOCKET_BAD);
            }
            if (!any) ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // time-outs and retries
        }
    }

    mutable std::mutex mutex;
    mutable std::condition_variable change_cv;
    NameTable table;                      // under `mutex`
    std::atomic<uint64_t> generation{0};  // changed under `mutex`
    std::atomic<bool> stopping{false};
    ares_channel channel = nullptr;  // the thread's only, once it runs
    int wake_fd = -1;
    std::thread thread;
};

Resolver::Resolver(ResolverOptions options) : impl_(std::make_unique<Impl>(options)) {}

Resolver::~Resolver() = default;

void Resolver::set_names(const std::vector<std::string>& names) {
    {
        std::lock_guard lock(impl_->mutex);
        if (impl_->table.set_names(names, Clock::now())) impl_->changed();
    }
    impl_->wake();
}

uint64_t Resolver::generation() const {
    return impl_->generation.load();
}

Snapshot Resolver::snapshot() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->table.snapshot();
}

uint64_t Resolver::wait_for_change(uint64_t seen, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(impl_->mutex);
    impl_->change_cv.wait_for(lock, timeout, [&] { return impl_->generation.load() != seen; });
    return impl_->generation.load();
}

}  // namespace egw::dns
