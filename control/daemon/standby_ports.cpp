// SPDX-License-Identifier: Apache-2.0
#include "control/daemon/standby_ports.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "control/cli/worker_requests.h"
#include "control/sync/transport.h"
#include "dataplane/nat_session.h"
#include "dataplane/publish.h"
#include "dataplane/sync_record.h"

namespace egw::control {

namespace {

// A conflict stays visible: while there are some, the local sessions are checked again this
// often even when the standby table did not change (they end, or the peer's session does).
constexpr std::chrono::seconds kRecheckConflicts{5};

}  // namespace

nlohmann::json sync_json(const sync::SyncServiceStats& s) {
    nlohmann::json peers = nlohmann::json::array();
    for (const sync::SyncPeerStatus& p : s.peers) {
        uint64_t acked = 0;
        for (uint64_t n : p.link.ack_lag)
            acked += n;
        peers.push_back({{"id", p.id},
                         {"address", p.address},
                         {"up", p.alive},
                         {"since_heard_s", p.since_heard_s},
                         {"events_sent", p.link.events_sent},
                         {"events_received", p.link.events_received},
                         {"datagrams_sent", p.link.datagrams_sent},
                         {"datagrams_received", p.link.datagrams_received},
                         {"keepalives_sent", p.link.keepalives_sent},
                         {"resent", p.link.resent},
                         {"gaps", p.link.gaps},
                         {"lost_in", p.link.lost},
                         {"lost_out", p.link.lost_announced},
                         {"evicted", p.link.evicted},
                         {"duplicates", p.link.duplicates},
                         {"peer_restarts", p.link.peer_restarts},
                         {"unacknowledged", p.unacknowledged},
                         {"bulk_complete", p.bulk_complete},
                         {"acked", acked},
                         {"ack_lag_seconds", p.link.ack_lag_seconds}});
    }
    nlohmann::json refused = nlohmann::json::object();
    for (size_t r = 0; r < sync::kRefusalCount; ++r)
        refused[std::string(sync::refusal_name(static_cast<sync::Refusal>(r)))] = s.refused[r];
    nlohmann::json services = nlohmann::json::array();
    for (const auto& [addr, n] : s.standby_per_service)
        services.push_back({{"address", sync::address_text(addr)}, {"sessions", n}});
    return {{"peers", peers},
            {"events_out", s.events_out},
            {"events_in", s.events_in},
            {"datagrams_out", s.datagrams_out},
            {"datagrams_in", s.datagrams_in},
            {"bytes_out", s.bytes_out},
            {"bytes_in", s.bytes_in},
            {"send_errors", s.send_errors},
            {"ring_drops", s.ring_drops},
            {"refused", refused},
            {"bulk",
             {{"requests_sent", s.bulk_requests_sent},
              {"requests_received", s.bulk_requests_received},
              {"events_queued", s.bulk_queued},
              {"events_sent", s.bulk_sent},
              {"dumps_ended", s.bulk_dumps_ended}}},
            {"key_error", s.key_error ? nlohmann::json(*s.key_error) : nlohmann::json(nullptr)},
            {"standby",
             {{"sessions", s.standby_sessions},
              {"max", s.standby_max},
              {"created", s.standby.created},
              {"updated", s.standby.updated},
              {"removed", s.standby.removed},
              {"remove_unknown", s.standby.remove_unknown},
              {"aged", s.standby.aged},
              {"full", s.standby.full},
              {"stale_epoch", s.standby.stale_epoch},
              {"reserved_ports", s.reserved_ports},
              {"port_conflicts", s.port_conflicts},
              {"services", services}}}};
}

std::vector<sync::Event> session_dump(const std::vector<dp::Worker*>& workers, const dp::DataplaneShared& shared,
                                      uint64_t now_tsc, uint64_t tsc_hz, std::string& error) {
    std::vector<sync::Event> out;
    error = cli::for_each_session(workers, [&](const dp::Worker&, const dp::SessionRecord& r) {
        auto event = [&](const auto& s) {
            return dp::sync_event_of(dp::SyncEventKind::create, s,
                                     s.last_seen + dp::session_timeout(shared.timeouts, s));
        };
        out.push_back(sync::to_wire(r.v6 ? event(r.session6) : event(r.session), now_tsc, tsc_hz, 0));
        return true;
    });
    return out;
}

dp::FlowKey outside_key4(const sync::StandbyKey& k) {
    dp::FlowKey f{};
    std::memcpy(&f.src, k.remote.addr.data() + 12, 4);
    std::memcpy(&f.dst, k.outside.addr.data() + 12, 4);
    f.sport = htons(k.remote.port);
    f.dport = htons(k.outside.port);
    f.proto = k.protocol;
    return f;
}

dp::FlowKey6 outside_key6(const sync::StandbyKey& k) {
    dp::FlowKey6 f{};
    std::memcpy(f.src, k.remote.addr.data(), 16);
    std::memcpy(f.dst, k.outside.addr.data(), 16);
    f.sport = htons(k.remote.port);
    f.dport = htons(k.outside.port);
    f.proto = k.protocol;
    return f;
}

StandbyPorts::StandbyPorts(dp::DataplaneShared& shared, sync::SyncService& sync, std::vector<dp::Worker*> workers)
    : shared_(shared), sync_(sync), workers_(std::move(workers)) {}

StandbyPorts::~StandbyPorts() {
    if (current_) delete dp::publish_reservations(shared_, nullptr);
}

void StandbyPorts::poll(std::chrono::steady_clock::time_point now) {
    if (now < next_) return;
    uint64_t version = sync_.standby_version();
    bool recheck = stats_.conflicts > 0 && now - next_ >= kRecheckConflicts;
    if (version == published_version_ && !recheck) return;
    auto began = std::chrono::steady_clock::now();
    if (version != published_version_) {
        std::vector<dp::FlowKey> v4;
        std::vector<dp::FlowKey6> v6;
        sync_.with_standby([&](const sync::StandbyTable& t) {
            published_version_ = t.version();
            v4.reserve(t.size());
            t.for_each([&](const sync::StandbyKey& k, const sync::StandbySession&) {
                if (k.family == 4)
                    v4.push_back(outside_key4(k));
                else
                    v6.push_back(outside_key6(k));
            });
        });
        const dp::PortReservations* next = v4.empty() && v6.empty() ? nullptr : new dp::PortReservations(v4, v6);
        delete dp::publish_reservations(shared_, next);
        current_ = next;
        stats_.reserved = next ? next->size() : 0;
        ++stats_.publications;
    }
    check_conflicts();
    sync_.set_port_stats(stats_.reserved, stats_.conflicts);
    auto took = std::chrono::steady_clock::now() - began;
    next_ = now + std::max<std::chrono::steady_clock::duration>(kMinInterval, 10 * took);
}

void StandbyPorts::check_conflicts() {
    uint64_t before = stats_.conflicts;
    if (!current_) {
        stats_.conflicts = 0;
        return;
    }
    uint64_t found = 0;
    stats_.check_error = cli::for_each_session(workers_, [&](const dp::Worker&, const dp::SessionRecord& r) {
        bool held = r.v6 ? current_->reserved(dp::SessionFamily6::outside_key(r.session6))
                         : current_->reserved(dp::SessionFamily4::outside_key(r.session));
        if (held) ++found;
        return true;
    });
    ++stats_.checks;
    stats_.conflicts = found;
    if (found > 0 && before == 0)
        spdlog::warn(
            "session sync: {} local session(s) hold NAT ports of a peer's sessions; taking those over "
            "would find their ports taken",
            found);
    else if (found == 0 && before > 0)
        spdlog::info("session sync: no local session holds a peer's NAT port any more");
}

}  // namespace egw::control
