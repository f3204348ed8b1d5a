// SPDX-License-Identifier: Apache-2.0
//
// List+watch against the test API server: pagination, events, bookmarks, resume after a cut,
// relist after 410, backoff after 500s, a wrong token, RBAC's 403, and the typed cache.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "apiserver_process.h"
#include "control/k8s/cache.h"
#include "control/k8s/client.h"
#include "control/k8s/reflector.h"

namespace egw::k8s {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::ApiServerProcess;
using testing::eventually;
using testing::LogCapture;

// A ReflectorHandler keeping raw objects by key, and counting what it was given.
class RawStore : public ReflectorHandler {
public:
    void replace(std::vector<json>&& items, const std::string& rv) override {
        std::lock_guard lk(mu_);
        objects_.clear();
        for (auto& o : items) {
            const std::string k = key(o);  // before the move: json's operator= takes its argument by value
            objects_[k] = std::move(o);
        }
        ++lists_;
        list_rv_ = rv;
    }
    void apply(EventType type, json&& obj) override {
        std::lock_guard lk(mu_);
        ++events_[type];
        const std::string k = key(obj);
        seen_[k].push_back(to_string(type));
        if (type == EventType::deleted)
            objects_.erase(k);
        else
            objects_[k] = std::move(obj);
    }
    std::map<std::string, json> objects() const {
        std::lock_guard lk(mu_);
        return objects_;
    }
    size_t size() const {
        std::lock_guard lk(mu_);
        return objects_.size();
    }
    int events(EventType t) const {
        std::lock_guard lk(mu_);
        auto it = events_.find(t);
        return it == events_.end() ? 0 : it->second;
    }
    std::map<std::string, std::vector<std::string>> seen() const {
        std::lock_guard lk(mu_);
        return seen_;
    }
    int lists() const {
        std::lock_guard lk(mu_);
        return lists_;
    }

    static std::string key(const json& o) {
        const auto& m = o["metadata"];
        return m.value("namespace", "") + "/" + m["name"].get<std::string>();
    }

private:
    mutable std::mutex mu_;
    std::map<std::string, json> objects_;
    std::map<EventType, int> events_;
    std::map<std::string, std::vector<std::string>> seen_;
    int lists_ = 0;
    std::string list_rv_;
};

ReflectorOptions fast_options() {
    ReflectorOptions o;
    o.backoff_initial = 50ms;
    o.backoff_max = 400ms;
    o.page_size = 500;
    return o;
}

class ReflectorTest : public ::testing::Test {
protected:
    void SetUp() override {
        server_ = std::make_unique<ApiServerProcess>(std::vector<std::string>{"--bookmark-interval", "0"});
        Credentials c;
        c.server = server_->url();
        c.source = "test";
        transport_ = std::make_shared<Transport>(c);
    }
    void TearDown() override {
        if (reflector_) reflector_->stop();
        reflector_.reset();
        server_.reset();
    }
    void start(ReflectorHandler& h, const ResourceType& type = resources::nodes, ReflectorOptions o = fast_options()) {
        reflector_ = std::make_unique<Reflector>(transport_, type, h, o);
        reflector_->start();
    }
    // The objects of a fresh list, keyed like RawStore, without kind/apiVersion.
    std::map<std::string, json> fresh_list(const std::string& path) {
        auto r = server_->call("GET", path);
        EXPECT_EQ(r.status, 200);
        std::map<std::string, json> out;
        for (auto& o : r.body["items"])
            out[RawStore::key(o)] = o;
        return out;
    }
    static std::map<std::string, json> strip(std::map<std::string, json> m) {
        for (auto& [k, o] : m) {
            o.erase("kind");
            o.erase("apiVersion");
        }
        return m;
    }
    json upsert(const json& obj) { return server_->control("upsert", obj); }

    LogCapture log_;
    std::unique_ptr<ApiServerProcess> server_;
    std::shared_ptr<Transport> transport_;
    std::unique_ptr<Reflector> reflector_;
};

TEST_F(ReflectorTest, ListsInPages) {
    json batch = json::array();
    for (int i = 0; i < 25; ++i)
        batch.push_back(testing::node("node-" + std::to_string(100 + i)));
    upsert(batch);
    RawStore store;
    auto o = fast_options();
    o.page_size = 10;
    start(store, resources::nodes, o);
    ASSERT_TRUE(eventually([&] { return reflector_->synced(); }));
    EXPECT_EQ(store.size(), 25u);
    EXPECT_EQ(store.lists(), 1);
    EXPECT_EQ(server_->requests("list").size(), 3u);  // 10 + 10 + 5
    // Items of a built-in list come without kind/apiVersion; the reflector fills them in.
    EXPECT_EQ(store.objects().begin()->second["kind"], "Node");
    EXPECT_EQ(store.objects().begin()->second["apiVersion"], "v1");
    EXPECT_EQ(strip(store.objects()), strip(fresh_list("/api/v1/nodes")));
}

TEST_F(ReflectorTest, WatchAddedModifiedDeleted) {
    upsert(testing::node("a"));
    RawStore store;
    start(store);
    ASSERT_TRUE(eventually([&] { return reflector_->synced() && reflector_->status().watching; }));
    upsert(testing::node("b"));
    upsert(testing::node("a", {{"role", "gateway"}}));
    server_->call("DELETE", "/api/v1/nodes/b");
    ASSERT_TRUE(eventually([&] { return store.events(EventType::deleted) == 1; }));
    EXPECT_EQ(store.events(EventType::added), 1);
    EXPECT_EQ(store.events(EventType::modified), 1);
    auto objs = store.objects();
    ASSERT_EQ(objs.size(), 1u);
    EXPECT_EQ(objs["/a"]["metadata"]["labels"]["role"], "gateway");
    EXPECT_EQ(strip(objs), strip(fresh_list("/api/v1/nodes")));
    EXPECT_EQ(reflector_->status().resource_version, server_->control_get("state")["resourceVersion"]);
}

TEST_F(ReflectorTest, BookmarkAdvancesTheResourceVersionSoResumeNeedsNoRelist) {
    RawStore store;
    auto o = fast_options();
    o.watch_timeout = 1s;  // each watch ends after a second and is resumed
    start(store, resources::nodes, o);
    ASSERT_TRUE(eventually([&] { return reflector_->synced() && reflector_->status().watching; }));
    const std::string list_rv = reflector_->status().resource_version;
    // Another kind moves the global resourceVersion; only a bookmark tells the node watch.
    upsert(testing::egress_service("default", "e"));
    const std::string now_rv = server_->control_get("state")["resourceVersion"];
    ASSERT_NE(now_rv, list_rv);
    // (A bookmark asked for while one watch ends and the next begins is lost: ask until it lands.)
    ASSERT_TRUE(eventually([&] {
        server_->control("bookmark");
        return eventually([&] { return reflector_->status().resource_version == now_rv; }, 200ms);
    }));
    EXPECT_GE(reflector_->status().bookmarks, 1u);
    // History before now_rv is gone: a resume from list_rv would get 410, from now_rv it does not.
    server_->control("compact");
    const auto watches = reflector_->status().watches;
    ASSERT_TRUE(eventually([&] { return reflector_->status().watches >= watches + 2; }, 8s));
    EXPECT_EQ(reflector_->status().expired, 0u);
    EXPECT_EQ(reflector_->status().lists, 1u);
    EXPECT_EQ(store.lists(), 1);
    for (auto& w : server_->requests("watch"))
        EXPECT_EQ(w["code"], 200) << w.dump();
}

TEST_F(ReflectorTest, StreamCutMidEventResumesWithoutLossOrDuplicates) {
    server_->control("config", {{"chunkSize", 5}});  // events straddle chunk boundaries
    upsert(json::array({testing::node("a"), testing::node("b")}));
    RawStore store;
    start(store);
    ASSERT_TRUE(eventually([&] { return reflector_->synced() && reflector_->status().watching; }));
    // The next watch is cut in the middle of its third event.
    server_->control("faults", {{"cuts", json::array({{{"afterEvents", 2}, {"path", "/api/v1/nodes"}}})}});
    server_->control("close-watches");
    ASSERT_TRUE(eventually(
        [&] { return server_->requests("watch").size() >= 2 && server_->requests("watch").back()["code"] == 200; }));
    json batch = json::array();
    for (int i = 0; i < 5; ++i)
        batch.push_back(testing::node("n" + std::to_string(i)));
    upsert(batch);
    ASSERT_TRUE(eventually([&] { return store.size() == 7; }));
    // Three watches: the first (ended cleanly), the cut one, the resumed one.
    ASSERT_TRUE(eventually([&] { return server_->requests("watch").size() >= 3; }));
    EXPECT_EQ(store.events(EventType::added), 5);
    for (auto& [key, types] : store.seen())
        EXPECT_EQ(types.size(), 1u) << key;
    auto st = reflector_->status();
    EXPECT_EQ(st.failures, 1u);
    EXPECT_EQ(st.expired, 0u);
    EXPECT_EQ(st.lists, 1u);
    // Why each watch ended: the first cleanly, the second cut; the third is still open.
    EXPECT_EQ(st.watch_closed, 1u);
    EXPECT_EQ(st.watch_failures, 1u);
    EXPECT_EQ(st.list_failures, 0u);
    EXPECT_EQ(st.events, 5u);
    EXPECT_EQ(strip(store.objects()), strip(fresh_list("/api/v1/nodes")));
    EXPECT_EQ(log_.sink().count(spdlog::level::warn, "stream broken"), 1u);
}

// Relist after 410: the typed cache ends up equal to a fresh list.
class RelistTest : public ReflectorTest, public ::testing::WithParamInterface<std::string> {};

model::ObjectSet fresh_object_set(ApiServerProcess& server) {
    model::ObjectSet set;
    auto r = server.call("GET", "/api/v1/nodes");
    for (auto item : r.body["items"]) {
        item["kind"] = "Node";
        item["apiVersion"] = "v1";
        set.upsert(model::parse_object(item));
    }
    return set;
}

TEST_P(RelistTest, CompactedHistoryRelistsAndTheCacheEqualsAFreshList) {
    server_->control("config", {{"watchExpiredAs", GetParam()}});
    json batch = json::array();
    for (int i = 0; i < 5; ++i)
        batch.push_back(testing::node("n" + std::to_string(i)));
    upsert(batch);
    Cache cache;
    cache.expect(model::Kind::node);
    start(cache.handler(model::Kind::node));
    ASSERT_TRUE(cache.wait_synced(10s));
    ASSERT_TRUE(eventually([&] { return reflector_->status().watching; }));
    // The next watch is held back 1.5 s; meanwhile objects change and history is compacted, so
    // that watch starts from a resourceVersion the server no longer has.
    server_->control("faults", {{"delays", json::array({{{"verb", "watch"}, {"ms", 1500}}})}});
    server_->control("close-watches");
    server_->call("DELETE", "/api/v1/nodes/n0");
    upsert(testing::node("n1", {{"changed", "yes"}}));
    upsert(testing::node("n5"));
    server_->control("compact");
    ASSERT_TRUE(eventually([&] { return reflector_->status().lists == 2; }));
    auto st = reflector_->status();
    EXPECT_EQ(st.expired, 1u);
    EXPECT_EQ(st.failures, 0u);
    EXPECT_EQ(st.watch_closed, 1u);  // close-watches ended the first stream cleanly
    EXPECT_EQ(st.watch_failures, 0u);
    ASSERT_TRUE(eventually([&] { return cache.snapshot() == fresh_object_set(*server_); }));
    auto snap = cache.snapshot();
    EXPECT_FALSE(snap.nodes.count("n0"));
    EXPECT_TRUE(snap.nodes.count("n5"));
    EXPECT_EQ(snap.nodes.at("n1").meta.labels.at("changed"), "yes");
    EXPECT_EQ(log_.sink().count(spdlog::level::info, "too old"), 1u);
    EXPECT_EQ(log_.sink().count(spdlog::level::warn), 0u);
}

INSTANTIATE_TEST_SUITE_P(Http410AndErrorEvent, RelistTest, ::testing::Values("http", "event"));

TEST_F(ReflectorTest, ExpiredMidStreamRelists) {
    upsert(json::array({testing::node("a"), testing::node("b")}));
    Cache cache;
    cache.expect(model::Kind::node);
    start(cache.handler(model::Kind::node));
    ASSERT_TRUE(cache.wait_synced(10s));
    ASSERT_TRUE(eventually([&] { return reflector_->status().watching; }));
    upsert(testing::node("c"));
    ASSERT_TRUE(eventually([&] { return cache.snapshot().nodes.size() == 3; }));
    server_->control("compact", {{"expireWatches", true}});  // ERROR 410 on the open stream
    ASSERT_TRUE(eventually([&] { return reflector_->status().lists == 2 && reflector_->status().watching; }));
    EXPECT_EQ(reflector_->status().expired, 1u);
    EXPECT_EQ(reflector_->status().watch_closed, 0u);
    EXPECT_EQ(reflector_->status().watch_failures, 0u);
    EXPECT_EQ(cache.snapshot(), fresh_object_set(*server_));
}

TEST_F(ReflectorTest, ServerErrorsBackOffThenSucceed) {
    upsert(testing::node("a"));
    server_->control("faults", {{"errors", json::array({{{"verb", "list"}, {"code", 500}, {"count", 3}}})}});
    RawStore store;
    auto o = fast_options();
    o.backoff_initial = 100ms;
    o.backoff_max = 10s;
    const auto t0 = std::chrono::steady_clock::now();
    start(store, resources::nodes, o);
    ASSERT_TRUE(eventually([&] { return reflector_->synced(); }));
    const auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(waited, 700ms);  // 100 + 200 + 400 ms at least (jitter only adds)
    EXPECT_LT(waited, 3s);
    EXPECT_EQ(reflector_->status().failures, 3u);
    EXPECT_EQ(reflector_->status().list_failures, 3u);
    EXPECT_EQ(reflector_->status().watch_failures, 0u);
    EXPECT_EQ(store.size(), 1u);
    auto lists = server_->requests("list");
    ASSERT_EQ(lists.size(), 4u);
    EXPECT_EQ(lists[0]["code"], 500);
    EXPECT_EQ(lists[3]["code"], 200);
    // One line for the streak (with the retry delay), one for the recovery.
    EXPECT_EQ(log_.sink().count(spdlog::level::warn), 1u);
    EXPECT_EQ(log_.sink().count(spdlog::level::warn, "list failed: HTTP 500 InternalError"), 1u);
    EXPECT_EQ(log_.sink().count(spdlog::level::warn, "retrying in 0.1s"), 1u);
    EXPECT_EQ(log_.sink().count(spdlog::level::info, "succeeded after 3 failures"), 1u);
}

TEST_F(ReflectorTest, WatchServerErrorsBackOffAndResume) {
    RawStore store;
    auto o = fast_options();
    o.backoff_initial = 100ms;
    o.backoff_max = 10s;
    start(store, resources::nodes, o);
    ASSERT_TRUE(eventually([&] { return reflector_->synced() && reflector_->status().watching; }));
    server_->control("faults", {{"errors", json::array({{{"verb", "watch"}, {"code", 503}, {"count", 2}}})}});
    const auto t0 = std::chrono::steady_clock::now();
    server_->control("close-watches", {{"abort", true}});
    upsert(testing::node("later"));
    ASSERT_TRUE(eventually([&] { return store.size() == 1; }));
    // Three waits before the watch that delivers the event: 100 + 200 + 400 ms at least (jitter
    // only adds, and no other request of the transport is answered to end them early).
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 700ms);
    EXPECT_EQ(reflector_->status().lists, 1u);     // resumed, not relisted
    EXPECT_EQ(reflector_->status().failures, 3u);  // the abort, then two 503s
    EXPECT_EQ(reflector_->status().watch_failures, 3u);
    EXPECT_EQ(reflector_->status().list_failures, 0u);
    EXPECT_EQ(reflector_->status().watch_closed, 0u);
    // One line for the streak (the cut stream, with the first delay: 100 to 149 ms), the 503s at
    // debug, then the recovery.
    EXPECT_EQ(log_.sink().count(spdlog::level::warn), 1u);
    EXPECT_EQ(log_.sink().count(spdlog::level::warn, "watch failed: stream broken: "), 1u);
    EXPECT_EQ(log_.sink().count(spdlog::level::warn, "; retrying in 0.1s"), 1u);
    EXPECT_EQ(log_.sink().count(spdlog::level::debug, "watch failed again (2 in a row): HTTP 503"), 1u);
    EXPECT_EQ(log_.sink().count(spdlog::level::debug, "watch failed again (3 in a row): HTTP 503"), 1u);
    EXPECT_TRUE(
        eventually([&] { return log_.sink().count(spdlog::level::info, "watch succeeded after 3 failures") == 1u; }));
}

// current_until says how stale the cache may be: "now" while a stream is open, frozen at the
// moment the stream ended while the server cannot be reached.
TEST_F(ReflectorTest, CurrentUntilIsNowWhileWatchingAndFreezesWhenTheWatchIsLost) {
    const auto unix_now = [] {
        return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    };
    EXPECT_EQ(ReflectorStatus{}.current_until, 0.0);
    RawStore store;
    auto o = fast_options();
    o.backoff_initial = 2s;  // one failure, then a long wait: the stream stays down while we look
    o.backoff_max = 2s;
    start(store, resources::nodes, o);
    ASSERT_TRUE(eventually([&] { return reflector_->synced() && reflector_->status().watching; }));
    std::this_thread::sleep_for(300ms);
    EXPECT_NEAR(reflector_->status().current_until, unix_now(), 0.1);
    server_->control("faults", {{"errors", json::array({{{"verb", "watch"}, {"code", 503}, {"count", 100}}})}});
    server_->control("close-watches", {{"abort", true}});
    ASSERT_TRUE(eventually([&] { return !reflector_->status().watching && reflector_->status().failures >= 1; }));
    const double frozen = reflector_->status().current_until;
    EXPECT_NEAR(frozen, unix_now(), 0.5);
    std::this_thread::sleep_for(400ms);
    EXPECT_EQ(reflector_->status().current_until, frozen);
    EXPECT_GE(unix_now() - frozen, 0.4);
}

TEST(ReflectorAuth, WrongTokenLogsOnceRetriesAndRecovers) {
    LogCapture log;
    ApiServerProcess server({"--token", "right"});
    Credentials c;
    c.server = server.url();
    c.token = "wrong";
    c.source = "test kubeconfig";
    auto transport = std::make_shared<Transport>(c);
    RawStore store;
    Reflector r(transport, resources::nodes, store, fast_options());
    r.start();
    ASSERT_TRUE(eventually([&] { return r.status().failures >= 4; }));
    EXPECT_FALSE(r.synced());
    EXPECT_EQ(log.sink().count(spdlog::level::warn), 1u);
    auto lines = log.sink().lines(spdlog::level::warn);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("HTTP 401 Unauthorized"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("rejected the credentials from test kubeconfig"), std::string::npos) << lines[0];
    EXPECT_GE(transport->stats().unauthorized, 4u);
    // The server starts accepting the client's token: the same reflector gets in.
    server.control("config", {{"token", "wrong"}});
    ASSERT_TRUE(eventually([&] { return r.synced(); }));
    EXPECT_EQ(log.sink().count(spdlog::level::warn), 1u);
    EXPECT_EQ(log.sink().count(spdlog::level::info, "list succeeded after"), 1u);
    r.stop();
}

TEST(ReflectorAuth, ForbiddenListLogsOnceWithAnRbacHintAndRecovers) {
    LogCapture log;
    testing::TempDir dir;
    // docker/k8s/rbac.yaml without the rule on Nodes, then with it.
    std::ifstream in(testing::source_root() + "/docker/k8s/rbac.yaml");
    const std::string full((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string rule = "- apiGroups: [\"\"]\n  resources: [\"nodes\"]";
    ASSERT_NE(full.find(rule), std::string::npos);
    std::string restricted = full;
    restricted.replace(restricted.find(rule), rule.size(), "- apiGroups: [\"\"]\n  resources: [\"configmaps\"]");
    dir.write("full.yaml", full);
    dir.write("restricted.yaml", restricted);
    ApiServerProcess server({"--token", "t", "--rbac", dir.file("restricted.yaml")});
    Credentials c;
    c.server = server.url();
    c.token = "t";
    c.source = "test kubeconfig";
    RawStore store;
    Reflector r(std::make_shared<Transport>(c), resources::nodes, store, fast_options());
    r.start();
    ASSERT_TRUE(eventually([&] { return r.status().failures >= 4; }));
    EXPECT_FALSE(r.synced());
    auto lines = log.sink().lines(spdlog::level::warn);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("HTTP 403 Forbidden: nodes is forbidden: User "
                            "\"system:serviceaccount:egw-system:egwd\" cannot list resource \"nodes\""),
              std::string::npos)
        << lines[0];
    EXPECT_NE(lines[0].find("RBAC"), std::string::npos) << lines[0];
    server.control("config", {{"rbac", dir.file("full.yaml")}});
    ASSERT_TRUE(eventually([&] { return r.synced() && r.status().watching; }));
    EXPECT_EQ(log.sink().count(spdlog::level::warn), 1u);
    EXPECT_EQ(log.sink().count(spdlog::level::info, "list succeeded after"), 1u);
    r.stop();
}

// A restarted kube-apiserver answers 403 until its RBAC informers are filled, then allows the same
// requests: a refusal shorter than refusal_grace is never reported as a verdict (status().refused),
// and the reflector retries often enough to see it end although its delays had grown. A refusal
// that lasts is a verdict, once it has lasted refusal_grace, and ends with the first 2xx.
TEST(ReflectorAuth, RefusalIsAVerdictOnlyOnceItLasts) {
    ApiServerProcess server({"--token", "t", "--admin-token", "adm", "--bookmark-interval", "0"});
    Credentials c;
    c.server = server.url();
    c.token = "t";
    c.source = "test";
    RawStore store;
    auto o = fast_options();
    o.backoff_initial = 250ms;  // egwd's: the delays grow to seconds during an outage
    o.backoff_max = 4s;
    o.refusal_grace = 3s;
    Reflector r(std::make_shared<Transport>(c), resources::nodes, store, o);
    r.start();
    ASSERT_TRUE(eventually([&] { return r.status().watching; }));

    // A restart: 1 s away, then 2 s of 403s.
    server.control("disrupt", {{"outage", 1}, {"warmUp", 2}});
    const auto t0 = std::chrono::steady_clock::now();
    bool refused = false, watching_and_failing = false, saw_403 = false;
    while (std::chrono::steady_clock::now() - t0 < 10s) {
        auto st = r.status();
        refused |= st.refused;
        watching_and_failing |= st.watching && st.failing;
        saw_403 |= st.failing && st.failure_status == 403;
        if (std::chrono::steady_clock::now() - t0 > 3s && st.watching && !st.failing) break;
        std::this_thread::sleep_for(10ms);
    }
    const auto back = std::chrono::steady_clock::now() - t0;
    EXPECT_TRUE(saw_403) << "the warm-up refused nothing the reflector asked";
    EXPECT_FALSE(refused) << "a 2 s refusal was taken for a verdict";
    EXPECT_FALSE(watching_and_failing) << "status() said watching and failing at once";
    // Refused until 3 s; retried at least every refusal_grace / 4 (0.75 s) while refused.
    EXPECT_LT(back, 3s + 750ms + 1s) << "watching again after " << std::chrono::duration<double>(back).count() << " s";

    // A lasting refusal: a verdict between refusal_grace and a retry later, then ended by a 2xx.
    server.control("disrupt", {{"forbid", json::array({{{"verbs", {"watch", "list"}}, {"path", "/nodes"}}})}});
    server.control("close-watches", json::object());
    const auto t1 = std::chrono::steady_clock::now();
    ASSERT_TRUE(eventually([&] { return r.status().refused; }, 8s));
    const auto judged = std::chrono::steady_clock::now() - t1;
    EXPECT_GE(judged, 3s);
    EXPECT_LT(judged, 3s + 750ms * 3 / 2 + 1s);
    EXPECT_EQ(r.status().failure_status, 403);
    server.control("disrupt", {{"clear", true}});
    ASSERT_TRUE(eventually([&] { return r.status().watching; }, 10s));  // the delays are at most 6 s
    auto st = r.status();
    EXPECT_FALSE(st.refused);
    EXPECT_FALSE(st.failing);
    r.stop();
}

// A watch that opens with 200 after refusals ends the failure streak as status() reports it, at
// once, although the resource is quiet (no event, no bookmark) and the stream proves nothing more.
TEST_F(ReflectorTest, AWatchOpenedAfterRefusalsIsNotFailingOnAQuietResource) {
    RawStore store;
    start(store);
    ASSERT_TRUE(eventually([&] { return reflector_->status().watching; }));
    server_->control("faults", {{"errors", json::array({{{"verb", "watch"}, {"code", 403}, {"count", 2}}})}});
    server_->control("close-watches", json::object());
    ASSERT_TRUE(eventually([&] { return reflector_->status().watch_failures >= 2; }, 5s));
    bool watching_and_failing = false;
    const bool recovered = eventually(
        [&] {
            auto st = reflector_->status();
            watching_and_failing |= st.watching && st.failing;
            return st.watching && !st.failing && st.failure_status == 0 && !st.refused;
        },
        3s);
    EXPECT_TRUE(recovered) << "still failing on an open watch: " << reflector_->status().last_error;
    EXPECT_FALSE(watching_and_failing);
    EXPECT_EQ(store.events(EventType::added), 0);  // quiet: nothing but the 200 ended it
}

TEST(ReflectorStop, StopsPromptlyWithAnOpenWatchAndWhileBackingOff) {
    ApiServerProcess server;
    Credentials c;
    c.server = server.url();
    auto transport = std::make_shared<Transport>(c);
    RawStore store;
    {
        Reflector r(transport, resources::nodes, store, fast_options());
        r.start();
        ASSERT_TRUE(eventually([&] { return r.status().watching; }));
        const auto t0 = std::chrono::steady_clock::now();
        r.stop();
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);
    }
    server.control("faults", {{"errors", json::array({{{"verb", "list"}, {"code", 500}, {"count", 100}}})}});
    auto o = fast_options();
    o.backoff_initial = 5s;
    o.backoff_max = 5s;
    Reflector r(transport, resources::nodes, store, o);
    r.start();
    ASSERT_TRUE(eventually([&] { return r.status().failures >= 1; }));
    const auto t0 = std::chrono::steady_clock::now();
    r.stop();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);
}

// ---------------------------------------------------------------------------------------------
// The whole client: five kinds into the typed cache.

TEST(ClientCache, SyncsAllKindsAndReportsChanges) {
    LogCapture log;
    ApiServerProcess server({"--bookmark-interval", "0"});
    server.control(
        "upsert",
        json::array({testing::node("gw1", {{"egw", "gateway"}}), testing::service("default", "web", "203.0.113.10"),
                     testing::endpoint_slice("default", "web-abc", "web", "10.128.0.5", "gw1"),
                     testing::egress_service("default", "web", "blue"), testing::lease("egw", "egw-gw1", "gw1"),
                     testing::lease("other", "not-ours", "x")}));
    Credentials c;
    c.server = server.url();
    c.namespace_ = "egw";
    ClientOptions o;
    o.reflector = fast_options();
    // Declared before the client so that a failed assertion stops the client before the
    // listener's state goes away.
    std::vector<Change> heard;
    std::mutex mu;
    Client client(c, o);
    EXPECT_FALSE(client.synced());
    client.start();
    ASSERT_TRUE(client.wait_synced(10s));
    auto snap = client.cache().snapshot();
    EXPECT_EQ(snap.nodes.size(), 1u);
    EXPECT_EQ(snap.services.at("default/web").ingress.at(0).ip, "203.0.113.10");
    EXPECT_EQ(snap.endpoint_slices.at("default/web-abc").service_name, "web");
    EXPECT_EQ(snap.egress_services.at("default/web").network, "blue");
    EXPECT_EQ(snap.leases.size(), 1u);  // only the credentials' namespace
    EXPECT_EQ(snap.leases.at("egw/egw-gw1").holder_identity, "gw1");
    EXPECT_EQ(client.status().size(), 5u);
    EXPECT_EQ(server.requests("list", "/namespaces/egw/leases").size(), 1u);

    client.cache().set_listener([&](const Change& ch) {
        std::lock_guard lk(mu);
        heard.push_back(ch);
    });
    client.cache().take_changes();  // what the first lists brought
    const uint64_t gen = client.cache().generation();
    server.control("upsert", testing::egress_service("default", "web", "red"));
    EXPECT_NE(client.cache().wait_for_change(gen, 10s), gen);
    auto changes = client.cache().take_changes();
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].kind, model::Kind::egress_service);
    EXPECT_EQ(changes[0].key, "default/web");
    EXPECT_FALSE(changes[0].deleted);
    EXPECT_EQ(client.cache().snapshot().egress_services.at("default/web").network, "red");

    // A change that only moves resourceVersion (a field egw ignores) is not a change.
    json n = testing::node("gw1", {{"egw", "gateway"}});
    n["metadata"]["annotations"] = {{"unrelated", "x"}};
    const uint64_t gen2 = client.cache().generation();
    server.control("upsert", n);
    const std::string rv = server.control_get("state")["resourceVersion"];
    ASSERT_TRUE(eventually([&] { return client.cache().resource_versions(model::Kind::node)["gw1"] == rv; }));
    EXPECT_EQ(client.cache().generation(), gen2);

    // An object the model rejects is logged and left out.
    json bad = testing::egress_service("default", "bad");
    bad["spec"]["sourceIPBy"] = 5;
    server.control("upsert", bad);
    server.control("delete", {{"kind", "EgressService"}, {"namespace", "default"}, {"name", "web"}});
    ASSERT_TRUE(eventually([&] { return client.cache().snapshot().egress_services.empty(); }));
    ASSERT_TRUE(eventually([&] { return client.cache().invalid_objects() == 1; }));
    EXPECT_EQ(log.sink().count(spdlog::level::warn, "EgressService default/bad"), 1u);
    changes = client.cache().take_changes();
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_TRUE(changes[0].deleted);
    // The listener runs after the cache's lock is let go, so the change can be taken before the
    // listener has heard it.
    ASSERT_TRUE(eventually([&] {
        std::lock_guard lk(mu);
        return heard.size() >= 2;
    }));
    {
        std::lock_guard lk(mu);
        ASSERT_EQ(heard.size(), 2u);
        EXPECT_EQ(heard[1].key, "default/web");
        EXPECT_TRUE(heard[1].deleted);
    }
    const auto t0 = std::chrono::steady_clock::now();
    client.stop();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

}  // namespace
}  // namespace egw::k8s
