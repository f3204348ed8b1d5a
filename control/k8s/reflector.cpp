// SPDX-License-Identifier: Apache-2.0
#include "control/k8s/reflector.h"

#include <random>

#include "control/k8s/log.h"

namespace egw::k8s {

using nlohmann::json;

namespace {

std::string rv_of(const json& obj) {
    auto m = obj.find("metadata");
    if (m == obj.end() || !m->is_object()) return "";
    auto rv = m->find("resourceVersion");
    if (rv == m->end() || !rv->is_string()) return "";
    return rv->get<std::string>();
}

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string seconds(std::chrono::milliseconds d) {
    return fmt::format("{:.1f}s", static_cast<double>(d.count()) / 1000.0);
}

using SteadyClock = std::chrono::steady_clock;

int64_t steady_ns(SteadyClock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// More than this between two watch streams breaks the stretch: nothing was watched meanwhile.
constexpr auto kMaxGap = std::chrono::seconds(1);

// No response, or the server is overloaded or failing: an outage, over once it answers again.
bool outage(long status) {
    return status == 0 || status == 429 || status >= 500;
}

}  // namespace

bool refused_by_server(long status) {
    return status >= 400 && status < 500 && status != 408 && status != 409 && status != 410 && status != 429;
}

Reflector::Reflector(std::shared_ptr<Transport> transport, ResourceType type, ReflectorHandler& handler,
                     ReflectorOptions opts)
    : transport_(std::move(transport)),
      type_(std::move(type)),
      handler_(handler),
      opts_(std::move(opts)),
      backoff_(opts_.backoff_initial, opts_.backoff_max) {
    name_ = type_.plural;
    if (type_.namespaced && !opts_.namespace_.empty()) name_ += " in " + opts_.namespace_;
    status_.name = name_;
    status_.resource = type_.plural;
}

Reflector::~Reflector() {
    stop();
}

void Reflector::start() {
    if (thread_.joinable()) return;
    stopping_ = false;
    cancel_.reset();
    thread_ = std::thread([this] { run(); });
}

void Reflector::stop() {
    stopping_ = true;
    cancel_.cancel();
    {
        std::lock_guard lk(sleep_mu_);
        sleep_cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
}

ReflectorStatus Reflector::status() const {
    std::lock_guard lk(mu_);
    ReflectorStatus s = status_;
    s.synced = synced_.load();
    if (s.watching) s.current_until = unix_now();
    return s;
}

bool Reflector::sleep_for(std::chrono::milliseconds d) {
    std::unique_lock lk(sleep_mu_);
    return !sleep_cv_.wait_for(lk, d, [this] { return stopping_.load(); });
}

bool Reflector::sleep_until_answer(std::chrono::milliseconds d, uint64_t seen) {
    const auto start = SteadyClock::now();
    const auto end = start + d;
    const auto earliest = start + std::chrono::milliseconds(100);
    std::unique_lock lk(sleep_mu_);
    for (;;) {
        const auto now = SteadyClock::now();
        if (stopping_ || now >= end) return false;
        if (now >= earliest && transport_->answers() != seen) return true;
        sleep_cv_.wait_for(lk, std::min<SteadyClock::duration>(end - now, std::chrono::milliseconds(100)),
                           [this] { return stopping_.load(); });
    }
}

void Reflector::break_stretch() {
    if (since_ns_.exchange(0) != 0) breaks_.fetch_add(1);
}

void Reflector::mend_stretch(SteadyClock::time_point now) {
    int64_t zero = 0;
    since_ns_.compare_exchange_strong(zero, steady_ns(now));
}

Continuity Reflector::continuity() const {
    Continuity c;
    c.breaks = breaks_.load();
    const int64_t since = since_ns_.load();
    bool watching;
    {
        std::lock_guard lk(mu_);
        watching = status_.watching;
    }
    const int64_t now = steady_ns(SteadyClock::now());
    const bool gap = !watching && now - current_ns_.load() > std::chrono::nanoseconds(kMaxGap).count();
    if (since != 0 && !gap) c.since = SteadyClock::time_point(std::chrono::nanoseconds(since));
    return c;
}

void Reflector::fill_kind(json& obj) const {
    if (!obj.contains("kind")) obj["kind"] = type_.kind;
    if (!obj.contains("apiVersion")) obj["apiVersion"] = type_.api_version();
}

std::string Reflector::selectors() const {
    std::string q;
    if (!opts_.label_selector.empty()) q += "&labelSelector=" + url_encode(opts_.label_selector);
    if (!opts_.field_selector.empty()) q += "&fieldSelector=" + url_encode(opts_.field_selector);
    return q;
}

std::string Reflector::explain(const Response& r) const {
    return k8s::explain(r, transport_->credentials().source);
}

void Reflector::failure(const char* what, const std::string& error) {
    ++streak_;
    break_stretch();
    auto delay = backoff_.next();
    const uint64_t answers = transport_->answers();
    const long status = fail_status_;
    // A refusal is judged by how long it lasts: a restarting API server refuses what it allows a
    // moment later. Until it has lasted refusal_grace it is retried often enough to see it end.
    bool verdict = false;
    if (refused_by_server(status)) {
        const auto now = SteadyClock::now();
        if (!refused_since_) refused_since_ = now;
        verdict = now - *refused_since_ >= opts_.refusal_grace;
        if (!verdict) {
            const auto cap = std::chrono::duration_cast<std::chrono::milliseconds>(opts_.refusal_grace / 4);
            delay = std::min(delay, std::max(cap, std::chrono::milliseconds(1)));
        }
    }
    {
        std::lock_guard lk(mu_);
        ++status_.failures;
        status_.failing = true;
        status_.last_error = std::string(what) + ": " + error;
        status_.failure_status = status;
        status_.refused = verdict;
    }
    if (streak_ == 1) {
        logger()->warn("k8s: {}: {} failed: {}; retrying in {} (further failures logged at debug until it recovers)",
                       name_, what, error, seconds(delay));
    } else {
        logger()->debug("k8s: {}: {} failed again ({} in a row): {}; retrying in {}", name_, what, streak_, error,
                        seconds(delay));
    }
    // After an outage the backoff does not outlast it: the first answer the server gives to
    // anyone (another reflector, a Lease renewal) ends the wait and starts the delays over.
    if (!outage(status)) {
        sleep_for(delay);
    } else if (sleep_until_answer(delay, answers)) {
        backoff_.reset();
        logger()->debug("k8s: {}: the API server answers again; retrying the {} now", name_, what);
    }
}

void Reflector::recovered(const char* what) {
    backoff_.reset();
    if (streak_ > 0) {
        logger()->info("k8s: {}: {} succeeded after {} failure{}", name_, what, streak_, streak_ == 1 ? "" : "s");
        streak_ = 0;
    }
    refused_since_.reset();
    std::lock_guard lk(mu_);
    status_.failing = false;
    status_.failure_status = 0;
    status_.refused = false;
}

void Reflector::run() {
    bool need_list = true;
    unsigned expired_in_row = 0;
    auto last_list = std::chrono::steady_clock::now();
    std::string rv;
    while (!stopping_) {
        if (need_list) {
            std::vector<json> items;
            std::string list_rv, error;
            Outcome o = list(items, list_rv, error);
            if (o == Outcome::stopped) break;
            if (o == Outcome::failed) {
                {
                    std::lock_guard lk(mu_);
                    ++status_.list_failures;
                }
                failure("list", error);
                continue;
            }
            const size_t n = items.size();
            try {
                handler_.replace(std::move(items), list_rv);
            } catch (const std::exception& e) {
                logger()->error("k8s: {}: handling the list failed: {}", name_, e.what());
            }
            rv = list_rv;
            need_list = false;
            last_list = std::chrono::steady_clock::now();
            current_ns_ = steady_ns(last_list);
            mend_stretch(last_list);
            {
                std::lock_guard lk(mu_);
                ++status_.lists;
                status_.resource_version = rv;
                status_.current_until = unix_now();
            }
            // The failure streak ends (its line logged, the status no longer failing) before the
            // reflector says it is synced: whoever sees synced() sees the recovery too.
            recovered("list");
            if (!synced_.exchange(true))
                logger()->info("k8s: {}: listed {} object{} at resourceVersion {}", name_, n, n == 1 ? "" : "s", rv);
            else
                logger()->debug("k8s: {}: listed {} objects at resourceVersion {}", name_, n, rv);
        }

        std::string error;
        Outcome o = watch(rv, error);
        current_ns_ = steady_ns(SteadyClock::now());
        if (o == Outcome::expired || o == Outcome::failed) break_stretch();
        {
            std::lock_guard lk(mu_);
            if (status_.watching) status_.current_until = unix_now();
            status_.watching = false;
            if (o == Outcome::ok)
                ++status_.watch_closed;
            else if (o == Outcome::expired)
                ++status_.expired;
            else if (o == Outcome::failed)
                ++status_.watch_failures;
            rv = status_.resource_version;
        }
        if (o == Outcome::stopped) break;
        if (o == Outcome::expired) {
            logger()->info("k8s: {}: resourceVersion {} is too old ({}); listing again", name_, rv, error);
            need_list = true;
            // One 410 is routine; 410s in a row without progress back off like failures.
            if (++expired_in_row > 1 && !sleep_for(backoff_.next())) break;
            continue;
        }
        if (o == Outcome::failed) {
            failure("watch", error);
            continue;
        }
        expired_in_row = 0;
        if (opts_.relist_period.count() > 0 && std::chrono::steady_clock::now() - last_list >= opts_.relist_period)
            need_list = true;
    }
    std::lock_guard lk(mu_);
    status_.watching = false;
}

Reflector::Outcome Reflector::list(std::vector<json>& items, std::string& rv, std::string& error) {
    std::string cont;
    int restarts = 0;
    items.clear();
    for (;;) {
        if (stopping_) return Outcome::stopped;
        std::string path = type_.collection_path(opts_.namespace_) + "?";
        if (opts_.page_size > 0) path += "limit=" + std::to_string(opts_.page_size);
        if (!cont.empty()) path += "&continue=" + url_encode(cont);
        path += selectors();
        Response r = transport_->request("GET", path, "", "", &cancel_, opts_.list_timeout);
        if (r.cancelled || stopping_) return Outcome::stopped;
        if (r.status == 410 && !cont.empty() && restarts++ < 3) {
            // The continue token outlived its snapshot: start over for a consistent list.
            logger()->info("k8s: {}: list continuation expired; listing again from the start", name_);
            items.clear();
            cont.clear();
            continue;
        }
        if (!r.ok()) {
            error = explain(r);
            fail_status_ = r.status;
            return Outcome::failed;
        }
        fail_status_ = r.status;  // a page that cannot be read fails with the status it came with
        json page = json::parse(r.body, nullptr, false);
        if (page.is_discarded() || !page.is_object()) {
            error = "the list response is not a JSON object";
            return Outcome::failed;
        }
        auto it = page.find("items");
        if (it != page.end() && !it->is_null() && !it->is_array()) {
            error = "the list response's items is not an array";
            return Outcome::failed;
        }
        if (it != page.end() && it->is_array()) {
            for (auto& item : *it) {
                if (!item.is_object()) continue;
                fill_kind(item);
                items.push_back(std::move(item));
            }
        }
        rv = rv_of(page);
        cont.clear();
        if (auto m = page.find("metadata"); m != page.end() && m->is_object()) {
            if (auto c = m->find("continue"); c != m->end() && c->is_string()) cont = c->get<std::string>();
        }
        if (cont.empty()) return Outcome::ok;
    }
}

Reflector::Outcome Reflector::watch(const std::string& from_rv, std::string& error) {
    static thread_local std::mt19937 rng{std::random_device{}()};
    const long base = std::max<long>(1, static_cast<long>(opts_.watch_timeout.count()));
    const long timeout_s = base + std::uniform_int_distribution<long>(0, base - 1 > 0 ? base - 1 : 0)(rng);
    std::string path = type_.collection_path(opts_.namespace_) + "?watch=true&allowWatchBookmarks=true";
    if (!from_rv.empty()) path += "&resourceVersion=" + url_encode(from_rv);
    path += "&timeoutSeconds=" + std::to_string(timeout_s) + selectors();

    EventSplitter splitter;
    Outcome result = Outcome::ok;
    bool done = false;
    // A watch ends a failure streak once it proves healthy: it delivered an event or a bookmark,
    // ended cleanly, or stayed open a while. A 200 alone does not: a server (or proxy) that
    // accepts and then drops streams at once must back off and log once, not at every retry.
    bool progress = false;
    auto opened = std::chrono::steady_clock::now();
    auto made_progress = [&] {
        if (!progress) {
            progress = true;
            recovered("watch");
        }
    };

    auto on_response = [&](long status) {
        if (status < 200 || status >= 300) return;
        opened = std::chrono::steady_clock::now();
        // Nothing was watched between the last stream and this one: a long gap starts a new stretch.
        if (steady_ns(opened) - current_ns_.load() > std::chrono::nanoseconds(kMaxGap).count()) break_stretch();
        mend_stretch(opened);
        // The server accepted this watch: whatever it refused before, it allows it now. The backoff
        // and the log's streak wait for progress (below); serving is judged on this.
        refused_since_.reset();
        std::lock_guard lk(mu_);
        ++status_.watches;
        status_.watching = true;
        status_.failing = false;
        status_.failure_status = 0;
        status_.refused = false;
    };
    auto on_object = [&](json&& j) {
        if (done) return;
        WatchEvent ev = to_watch_event(std::move(j));
        switch (ev.type) {
        case EventType::added:
        case EventType::modified:
        case EventType::deleted: {
            std::string rv = rv_of(ev.object);
            if (rv.empty()) throw StreamError(std::string("a ") + to_string(ev.type) + " event has no resourceVersion");
            fill_kind(ev.object);
            handler_.apply(ev.type, std::move(ev.object));
            {
                std::lock_guard lk(mu_);
                ++status_.events;
                status_.resource_version = rv;
            }
            made_progress();
            break;
        }
        case EventType::bookmark: {
            std::string rv = rv_of(ev.object);
            if (rv.empty()) throw StreamError("a BOOKMARK event has no resourceVersion");
            handler_.bookmark(rv);
            {
                std::lock_guard lk(mu_);
                ++status_.bookmarks;
                status_.resource_version = rv;
            }
            made_progress();
            break;
        }
        case EventType::error: {
            ApiStatus st = api_status(ev.object);
            error = fmt::format("ERROR event {} {}: {}", st.code, st.reason, st.message);
            result = st.code == 410 ? Outcome::expired : Outcome::failed;
            fail_status_ = st.code;
            done = true;
            break;
        }
        }
    };
    auto on_data = [&](std::string_view bytes) -> bool {
        try {
            splitter.feed(bytes, on_object);
        } catch (const std::exception& e) {
            error = e.what();
            result = Outcome::failed;
            fail_status_ = 200;  // the server sent something unreadable
            done = true;
        }
        return !done && !stopping_;
    };

    Response r = transport_->stream(path, on_response, on_data, std::chrono::seconds(timeout_s + 30), &cancel_);
    if (stopping_) return Outcome::stopped;
    const bool was_open = r.status >= 200 && r.status < 300;
    if (was_open && (r.ok() || std::chrono::steady_clock::now() - opened >= std::chrono::seconds(30))) made_progress();
    if (done) return result;
    if (r.cancelled) return Outcome::stopped;
    if (r.status == 410) {
        error = describe(r);
        return Outcome::expired;
    }
    if (r.status < 200 || r.status >= 300) {
        error = explain(r);
        fail_status_ = r.status;
        return Outcome::failed;
    }
    if (!r.error.empty()) {
        fail_status_ = 0;  // the connection broke
        error = "stream broken: " + r.error;
        if (splitter.pending() > 0)
            error += fmt::format(" ({} bytes of an unfinished event dropped)", splitter.pending());
        return Outcome::failed;
    }
    return Outcome::ok;  // the server ended the stream
}

}  // namespace egw::k8s
