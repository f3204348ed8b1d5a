// SPDX-License-Identifier: Apache-2.0
//
// A watch response body is a sequence of JSON objects, one per event ({"type": ..., "object":
// ...}), newline-separated by the API server. The HTTP layer hands the body over in arbitrary
// pieces: an event may straddle any number of chunks, and a chunk may hold several events.
// EventSplitter reassembles whole objects whatever the boundaries; it finds the end of each one by
// tracking nesting and strings, so it does not depend on the newlines either.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace egw::k8s {

// The stream is not a sequence of JSON objects (or one is over the size limit).
class StreamError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class EventSplitter {
public:
    explicit EventSplitter(size_t max_object_bytes = size_t{256} << 20) : max_(max_object_bytes) {}

    // Appends bytes and calls on_object for every object they complete, in order. Throws
    // StreamError on malformed input; the splitter must then be reset().
    void feed(std::string_view bytes, const std::function<void(nlohmann::json&&)>& on_object);

    // Bytes of an object begun but not finished (what a cut stream loses).
    size_t pending() const { return buf_.size(); }
    void reset();

private:
    std::string buf_;  // the unfinished object, from its '{'
    size_t max_;
    int depth_ = 0;
    bool in_string_ = false;
    bool escape_ = false;
};

enum class EventType { added, modified, deleted, bookmark, error };

struct WatchEvent {
    EventType type;
    nlohmann::json object;  // the object; for ERROR a metav1.Status
};

// Interprets one object of a watch stream; throws StreamError when it is not a watch event.
WatchEvent to_watch_event(nlohmann::json&& j);
const char* to_string(EventType t);

}  // namespace egw::k8s
