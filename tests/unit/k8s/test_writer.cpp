// SPDX-License-Identifier: Apache-2.0
//
// Write-backs against the test API server: status merge patch, node labels, Leases.
#include <gtest/gtest.h>

#include "apiserver_process.h"
#include "control/k8s/writer.h"

namespace egw::k8s {
namespace {

using nlohmann::json;
using testing::ApiServerProcess;

class WriterTest : public ::testing::Test {
protected:
    void SetUp() override {
        server_ = std::make_unique<ApiServerProcess>(std::vector<std::string>{"--token", "t0k3n"});
        Credentials c;
        c.server = server_->url();
        c.token = "t0k3n";
        writer_ = std::make_unique<Writer>(std::make_shared<Transport>(c));
    }
    json get(const std::string& path) {
        auto r = server_->call("GET", path, "", "", "t0k3n");
        EXPECT_EQ(r.status, 200) << path;
        return r.body;
    }

    std::unique_ptr<ApiServerProcess> server_;
    std::unique_ptr<Writer> writer_;
};

constexpr const char* kEs = "/apis/k8s.ovn.org/v1/namespaces/default/egressservices/web";

TEST_F(WriterTest, StatusMergePatchDoesNotTouchSpec) {
    json es = testing::egress_service("default", "web", "blue");
    es["status"] = {{"host", "old-node"}};
    server_->control("upsert", es);
    const json before = get(kEs);

    WriteResult w = writer_->set_egress_service_host("default", "web", "gw1");
    ASSERT_TRUE(w.ok()) << w.error;
    EXPECT_EQ(w.object["status"]["host"], "gw1");
    const json after = get(kEs);
    EXPECT_EQ(after["spec"], before["spec"]);
    EXPECT_EQ(after["metadata"]["generation"], before["metadata"]["generation"]);
    EXPECT_EQ(after["status"]["host"], "gw1");
    auto patches = server_->requests("patch");
    ASSERT_EQ(patches.size(), 1u);
    EXPECT_EQ(patches[0]["path"], std::string(kEs) + "/status");

    // "" is a value, written as such.
    ASSERT_TRUE(writer_->set_egress_service_host("default", "web", "").ok());
    EXPECT_EQ(get(kEs)["status"]["host"], "");

    // A resourceVersion precondition that no longer holds is a conflict.
    w = writer_->patch_status(resources::egress_services, "default", "web", {{"host", "gw2"}},
                              before["metadata"]["resourceVersion"]);
    EXPECT_TRUE(w.conflict());
    EXPECT_EQ(w.reason, "Conflict");
    EXPECT_EQ(get(kEs)["status"]["host"], "");

    w = writer_->set_egress_service_host("default", "absent", "gw1");
    EXPECT_TRUE(w.not_found());
    EXPECT_EQ(w.reason, "NotFound");
    EXPECT_NE(w.error.find("HTTP 404 NotFound"), std::string::npos) << w.error;
}

TEST_F(WriterTest, NodeLabelsAreSetAndRemovedLeavingOthers) {
    server_->control("upsert", testing::node("gw1", {{"keep", "1"}, {"egress-service.k8s.ovn.org/default-old", ""}}));
    WriteResult w = writer_->patch_node_labels("gw1", {{"egress-service.k8s.ovn.org/default-web", ""},
                                                       {"egress-service.k8s.ovn.org/default-old", std::nullopt}});
    ASSERT_TRUE(w.ok()) << w.error;
    EXPECT_EQ(get("/api/v1/nodes/gw1")["metadata"]["labels"],
              json({{"keep", "1"}, {"egress-service.k8s.ovn.org/default-web", ""}}));
    EXPECT_EQ(get("/api/v1/nodes/gw1")["status"]["conditions"][0]["type"], "Ready");
    EXPECT_TRUE(writer_->patch_node_labels("absent", {{"a", "b"}}).not_found());
}

TEST_F(WriterTest, LeaseCreateThenUpdateRetriesAfterAConflict) {
    const std::string path = "/apis/coordination.k8s.io/v1/namespaces/egw/leases/egw-leader";
    // Absent: created.
    int calls = 0;
    WriteResult w = writer_->modify_lease("egw", "egw-leader", [&](json& lease, bool exists) {
        ++calls;
        EXPECT_FALSE(exists);
        lease["spec"]["holderIdentity"] = "gw1";
        lease["spec"]["leaseDurationSeconds"] = 15;
        lease["spec"]["renewTime"] = format_micro_time(std::chrono::system_clock::now());
        return true;
    });
    ASSERT_TRUE(w.ok()) << w.error;
    EXPECT_TRUE(w.written);
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(w.status, 201);
    EXPECT_EQ(get(path)["spec"]["holderIdentity"], "gw1");

    // Someone else updates it between our read and our write: 409, read again, apply again.
    server_->control("requests/reset");
    calls = 0;
    w = writer_->modify_lease("egw", "egw-leader", [&](json& lease, bool exists) {
        ++calls;
        EXPECT_TRUE(exists);
        if (calls == 1) {
            json other = testing::lease("egw", "egw-leader", "gw2");
            other["spec"]["leaseTransitions"] = 1;
            server_->control("upsert", other);
        } else {
            EXPECT_EQ(lease["spec"]["holderIdentity"], "gw2");  // the re-read sees the other write
        }
        lease["spec"]["holderIdentity"] = "gw1";
        lease["spec"]["leaseTransitions"] = lease["spec"].value("leaseTransitions", 0) + 1;
        return true;
    });
    ASSERT_TRUE(w.ok()) << w.error;
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(w.attempts, 4);  // get, put (409), get, put
    const json now = get(path);
    EXPECT_EQ(now["spec"]["holderIdentity"], "gw1");
    EXPECT_EQ(now["spec"]["leaseTransitions"], 2);
    auto updates = server_->requests("update");
    ASSERT_EQ(updates.size(), 2u);
    EXPECT_EQ(updates[0]["code"], 409);
    EXPECT_EQ(updates[1]["code"], 200);

    // The mutator may decline: nothing is written.
    server_->control("requests/reset");
    w = writer_->modify_lease("egw", "egw-leader", [](json&, bool) { return false; });
    EXPECT_FALSE(w.written);
    EXPECT_TRUE(w.ok());
    EXPECT_TRUE(server_->requests("update").empty());
}

TEST_F(WriterTest, LeaseCreateRaceAndStaleUpdate) {
    json l = testing::lease("egw", "egw-gw1", "gw1");
    WriteResult first = writer_->create_lease("egw", l);
    ASSERT_TRUE(first.ok()) << first.error;
    WriteResult again = writer_->create_lease("egw", l);
    EXPECT_TRUE(again.conflict());
    EXPECT_EQ(again.reason, "AlreadyExists");

    json current = writer_->get_lease("egw", "egw-gw1").object;
    current["spec"]["renewTime"] = format_micro_time(std::chrono::system_clock::now());
    ASSERT_TRUE(writer_->update_lease("egw", current).ok());
    // The same resourceVersion again is stale now.
    WriteResult stale = writer_->update_lease("egw", current);
    EXPECT_TRUE(stale.conflict());
    EXPECT_EQ(stale.reason, "Conflict");
    EXPECT_TRUE(writer_->get_lease("egw", "absent").not_found());

    // Created by someone else between our read (absent) and our create: read again, update.
    int calls = 0;
    WriteResult w = writer_->modify_lease("egw", "raced", [&](json& lease, bool exists) {
        if (++calls == 1) {
            EXPECT_FALSE(exists);
            server_->control("upsert", testing::lease("egw", "raced", "gw2"));
        } else {
            EXPECT_TRUE(exists);
        }
        lease["spec"]["holderIdentity"] = "gw1";
        return true;
    });
    ASSERT_TRUE(w.ok()) << w.error;
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(get("/apis/coordination.k8s.io/v1/namespaces/egw/leases/raced")["spec"]["holderIdentity"], "gw1");
}

}  // namespace
}  // namespace egw::k8s
