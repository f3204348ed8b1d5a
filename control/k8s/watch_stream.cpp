// SPDX-License-Identifier: Apache-2.0
#include "control/k8s/watch_stream.h"

namespace egw::k8s {

void EventSplitter::reset() {
    buf_.clear();
    depth_ = 0;
    in_string_ = false;
    escape_ = false;
}

void EventSplitter::feed(std::string_view bytes, const std::function<void(nlohmann::json&&)>& on_object) {
    size_t i = 0;
    while (i < bytes.size()) {
        if (depth_ == 0) {
            // Between objects: skip whitespace; anything else must open an object.
            const char c = bytes[i];
            if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
                ++i;
                continue;
            }
            if (c != '{') {
                reset();
                throw StreamError(std::string("watch stream: expected '{' between events, got '") + c + "'");
            }
        }
        // Scan to the end of the current object or of the input.
        const size_t begin = i;
        bool complete = false;
        for (; i < bytes.size(); ++i) {
            const char c = bytes[i];
            if (in_string_) {
                if (escape_)
                    escape_ = false;
                else if (c == '\\')
                    escape_ = true;
                else if (c == '"')
                    in_string_ = false;
                continue;
            }
            if (c == '"') {
                in_string_ = true;
            } else if (c == '{' || c == '[') {
                ++depth_;
            } else if (c == '}' || c == ']') {
                if (--depth_ == 0) {
                    ++i;
                    complete = true;
                    break;
                }
            }
        }
        if (buf_.size() + (i - begin) > max_) {
            reset();
            throw StreamError("watch stream: an event is larger than " + std::to_string(max_) + " bytes");
        }
        const bool whole = complete && buf_.empty();  // the common case: parse in place
        if (!whole) buf_.append(bytes.data() + begin, i - begin);
        if (!complete) return;
        nlohmann::json j;
        try {
            if (whole)
                j = nlohmann::json::parse(bytes.data() + begin, bytes.data() + i);
            else
                j = nlohmann::json::parse(buf_);
        } catch (const nlohmann::json::exception& e) {
            // parse_error for bad syntax, out_of_range for a number no double holds (1e400): both
            // are a malformed event (the watch fuzzer found the second escaping as a terminate).
            reset();
            throw StreamError(std::string("watch stream: malformed event: ") + e.what());
        }
        buf_.clear();
        on_object(std::move(j));
    }
}

const char* to_string(EventType t) {
    switch (t) {
    case EventType::added:
        return "ADDED";
    case EventType::modified:
        return "MODIFIED";
    case EventType::deleted:
        return "DELETED";
    case EventType::bookmark:
        return "BOOKMARK";
    case EventType::error:
        return "ERROR";
    }
    return "?";
}

WatchEvent to_watch_event(nlohmann::json&& j) {
    if (!j.is_object()) throw StreamError("watch stream: an event is not an object");
    auto t = j.find("type");
    auto o = j.find("object");
    if (t == j.end() || !t->is_string()) throw StreamError("watch stream: an event has no \"type\"");
    if (o == j.end() || !o->is_object()) throw StreamError("watch stream: an event has no \"object\"");
    const std::string& type = t->get_ref<const std::string&>();
    WatchEvent ev{EventType::error, std::move(*o)};
    if (type == "ADDED")
        ev.type = EventType::added;
    else if (type == "MODIFIED")
        ev.type = EventType::modified;
    else if (type == "DELETED")
        ev.type = EventType::deleted;
    else if (type == "BOOKMARK")
        ev.type = EventType::bookmark;
    else if (type == "ERROR")
        ev.type = EventType::error;
    else
        throw StreamError("watch stream: unknown event type \"" + type + "\"");
    return ev;
}

}  // namespace egw::k8s
