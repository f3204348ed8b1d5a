// SPDX-License-Identifier: Apache-2.0
//
// The control thread's side of the packet trace (dataplane/trace.h): it allocates each worker's
// buffer, hands it over through the worker's trace pointer, takes it back, and reads the records
// the workers published. Rendering (text and JSON) is separate from the workers so that it is
// tested on records made by hand.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataplane/trace.h"

namespace egw::cli {

class PacketTrace {
public:
    PacketTrace() = default;
    PacketTrace(const PacketTrace&) = delete;
    PacketTrace& operator=(const PacketTrace&) = delete;
    // Takes the buffers back from the workers (stopped by then, or still running) and frees them.
    ~PacketTrace();

    // Traces the next `limit` packets matching `match`, over all `workers` together. An earlier
    // trace's records are dropped once no worker can still be writing them (after an RCU grace
    // period of `shared`'s workers).
    void start(dp::DataplaneShared& shared, const std::vector<dp::Worker*>& workers, const dp::TraceMatch& match,
               uint32_t limit, uint64_t now_tsc);
    // The workers stop picking packets; what they recorded stays for show().
    void stop();

    bool started() const { return trace_ != nullptr; }
    bool active() const { return active_; }
    uint32_t limit() const { return trace_ ? trace_->limit : 0; }
    uint64_t start_tsc() const { return trace_ ? trace_->start_tsc : 0; }
    const dp::TraceMatch* match() const { return trace_ ? &trace_->match : nullptr; }

    struct Entry {
        unsigned worker;
        const dp::TracePacket* packet;
    };
    // The records published so far, in the order the workers took them (by their clock).
    std::vector<Entry> entries() const;

private:
    void take_back(dp::DataplaneShared* shared);

    dp::DataplaneShared* shared_ = nullptr;
    std::vector<dp::Worker*> workers_;
    std::unique_ptr<dp::TraceShared> trace_;
    std::vector<std::unique_ptr<dp::TraceBuffer>> buffers_;
    std::vector<std::unique_ptr<dp::TracePacket[]>> storage_;
    bool active_ = false;
};

// What show trace prints: per packet a line with its number, worker, port and time after start,
// one line per stage, then the headers before and after as tcpdump-like one-liners.
struct TraceView {
    std::map<uint16_t, std::string> port_names;
    uint64_t tsc_hz = 0;
    uint64_t start_tsc = 0;
};
std::string render_trace(const std::vector<PacketTrace::Entry>& entries, const TraceView& view);
nlohmann::json trace_json(const std::vector<PacketTrace::Entry>& entries, const TraceView& view);

// One decoded frame as a line: "02:00:00:00:00:01 > 02:00:00:00:00:02, IPv4 10.0.0.1.40000 >
// 192.0.2.1.80: TCP [S] ttl 64 id 1 len 60 ipsum 0x1234 sum 0xabcd".
std::string describe_frame(const uint8_t* frame, unsigned len);
nlohmann::json frame_json(const uint8_t* frame, unsigned len);

}  // namespace egw::cli
