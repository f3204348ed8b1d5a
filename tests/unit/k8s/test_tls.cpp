// SPDX-License-Identifier: Apache-2.0
//
// Credentials end to end: kubeconfig with a token, with a client certificate (files and inline
// data), with inline CA data; the server certificate is verified; in-cluster with a rotated token.
// A throwaway CA, server and client certificates are made with the openssl command.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "apiserver_process.h"
#include "control/k8s/client.h"
#include "control/k8s/credentials.h"
#include "control/k8s/http.h"

namespace egw::k8s {
namespace {

using namespace std::chrono_literals;
using testing::ApiServerProcess;
using testing::TempDir;

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// A kubeconfig with one context; `cluster` and `user` are YAML mapping bodies.
std::string kubeconfig(const std::string& cluster, const std::string& user) {
    return "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
           "clusters:\n- name: test\n  cluster:\n" +
           cluster + "users:\n- name: test\n  user:\n" + user +
           "contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n";
}

Response get_nodes(const Credentials& c) {
    Transport t(c);
    return t.request("GET", "/api/v1/nodes");
}

TEST(KubeconfigPlain, TokenOverHttp) {
    ApiServerProcess server({"--token", "s3cret"});
    server.control("upsert", testing::node("gw1"));
    TempDir d;
    d.write("config", kubeconfig("    server: " + server.url() + "\n", "    token: s3cret\n"));
    Client client(from_kubeconfig(d.file("config")));
    client.start({model::Kind::node});
    ASSERT_TRUE(client.wait_synced(10s));
    EXPECT_EQ(client.cache().snapshot().nodes.count("gw1"), 1u);
    client.stop();
}

class TlsTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        if (std::system("command -v openssl >/dev/null 2>&1") != 0) return;
        dir_ = new TempDir();
        const std::string& d = dir_->path();
        dir_->write("server.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
        dir_->write("client.ext", "extendedKeyUsage=clientAuth\n");
        const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        const std::string cmds[] = {
            "openssl req -x509" + ec + " -keyout ca.key -out ca.crt -days 1 -subj /CN=egw-test-ca",
            "openssl req" + ec + " -keyout server.key -out server.csr -subj /CN=egw-test-apiserver",
            "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 1 "
            "-extfile server.ext",
            "openssl req" + ec + " -keyout client.key -out client.csr -subj /CN=egwd",
            "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 1 "
            "-extfile client.ext",
            // A second CA that signed nothing of the server's.
            "openssl req -x509" + ec + " -keyout other.key -out other.crt -days 1 -subj /CN=other-ca",
        };
        for (const auto& c : cmds) {
            if (std::system(("cd '" + d + "' && " + c + " >/dev/null 2>&1").c_str()) != 0) {
                setup_error_ = new std::string("openssl failed: " + c);
                return;
            }
        }
        server_ = new ApiServerProcess({"--tls-cert", d + "/server.crt", "--tls-key", d + "/server.key", "--client-ca",
                                        d + "/ca.crt", "--token", "s3cret"});
        server_->control("upsert", testing::node("gw1"));
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
        delete dir_;
        dir_ = nullptr;
        delete setup_error_;
        setup_error_ = nullptr;
    }
    void SetUp() override {
        if (!dir_) GTEST_SKIP() << "the openssl command is not installed: TLS credential tests skipped";
        ASSERT_EQ(setup_error_, nullptr) << *setup_error_;
    }
    static std::string path(const std::string& name) { return dir_->file(name); }
    static std::string b64(const std::string& name) { return testing::base64_encode(slurp(path(name))); }
    static std::string server_line() { return "    server: " + server_->url() + "\n"; }

    static TempDir* dir_;
    static ApiServerProcess* server_;
    static std::string* setup_error_;
};

TempDir* TlsTest::dir_ = nullptr;
ApiServerProcess* TlsTest::server_ = nullptr;
std::string* TlsTest::setup_error_ = nullptr;

TEST_F(TlsTest, KubeconfigWithClientCertificateFiles) {
    // Relative names: resolved against the kubeconfig's directory. No token: the certificate
    // alone authenticates.
    dir_->write("cert-files.kubeconfig",
                kubeconfig(server_line() + "    certificate-authority: ca.crt\n",
                           "    client-certificate: client.crt\n    client-key: client.key\n"));
    Client client(from_kubeconfig(path("cert-files.kubeconfig")));
    client.start({model::Kind::node});
    ASSERT_TRUE(client.wait_synced(10s));
    EXPECT_EQ(client.cache().snapshot().nodes.count("gw1"), 1u);
    client.stop();
}

TEST_F(TlsTest, KubeconfigWithInlineCertificateKeyAndCaData) {
    dir_->write("cert-data.kubeconfig",
                kubeconfig(server_line() + "    certificate-authority-data: " + b64("ca.crt") + "\n",
                           "    client-certificate-data: " + b64("client.crt") +
                               "\n    client-key-data: " + b64("client.key") + "\n"));
    Credentials c = from_kubeconfig(path("cert-data.kubeconfig"));
    EXPECT_TRUE(c.ca_file.empty());
    Response r = get_nodes(c);
    EXPECT_EQ(r.status, 200) << describe(r);
}

TEST_F(TlsTest, KubeconfigWithCaDataAndToken) {
    dir_->write(
        "token.kubeconfig",
        kubeconfig(server_line() + "    certificate-authority-data: " + b64("ca.crt") + "\n", "    token: s3cret\n"));
    Response r = get_nodes(from_kubeconfig(path("token.kubeconfig")));
    EXPECT_EQ(r.status, 200) << describe(r);
    dir_->write(
        "badtoken.kubeconfig",
        kubeconfig(server_line() + "    certificate-authority-data: " + b64("ca.crt") + "\n", "    token: wrong\n"));
    r = get_nodes(from_kubeconfig(path("badtoken.kubeconfig")));
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(api_status(r).reason, "Unauthorized");
}

TEST_F(TlsTest, TheServerCertificateIsVerified) {
    dir_->write("other-ca.kubeconfig",
                kubeconfig(server_line() + "    certificate-authority: other.crt\n", "    token: s3cret\n"));
    Response r = get_nodes(from_kubeconfig(path("other-ca.kubeconfig")));
    EXPECT_EQ(r.status, 0);
    EXPECT_FALSE(r.error.empty());
    EXPECT_NE(describe(r).find("certificate"), std::string::npos) << describe(r);

    dir_->write("insecure.kubeconfig",
                kubeconfig(server_line() + "    insecure-skip-tls-verify: true\n", "    token: s3cret\n"));
    r = get_nodes(from_kubeconfig(path("insecure.kubeconfig")));
    EXPECT_EQ(r.status, 200) << describe(r);
}

class ScopedEnv {
public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (old_)
            setenv(name_.c_str(), old_->c_str(), 1);
        else
            unsetenv(name_.c_str());
    }

private:
    std::string name_;
    std::optional<std::string> old_;
};

TEST_F(TlsTest, InClusterRereadsARotatedTokenOn401) {
    TempDir sa;
    sa.write("token", "s3cret\n");
    sa.write("namespace", "egw");
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "127.0.0.1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", std::to_string(server_->port()));
    Credentials c = in_cluster(InClusterPaths{sa.file("token"), path("ca.crt"), sa.file("namespace")});
    EXPECT_EQ(c.namespace_, "egw");
    Transport t(c);
    EXPECT_EQ(t.request("GET", "/api/v1/nodes").status, 200);
    // The kubelet rotates the projected token; the API server only accepts the new one.
    server_->control("config", {{"token", "r0tated"}});
    sa.write("token", "r0tated\n");
    Response r = t.request("GET", "/api/v1/nodes");
    server_->control("config", {{"token", "s3cret"}});
    EXPECT_EQ(r.status, 200) << describe(r);
    EXPECT_EQ(t.token(), "r0tated");
    EXPECT_EQ(t.stats().unauthorized, 1u);
}

}  // namespace
}  // namespace egw::k8s
