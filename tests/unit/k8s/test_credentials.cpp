// SPDX-License-Identifier: Apache-2.0
//
// Kubeconfig and in-cluster credential loading (no server needed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "apiserver_process.h"
#include "control/k8s/credentials.h"

namespace egw::k8s {
namespace {

using testing::TempDir;

// Sets an environment variable for the scope, restoring the previous value.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value)
            setenv(name, value, 1);
        else
            unsetenv(name);
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

const char* kKubeconfig = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://dev.example:6443/
    certificate-authority: certs/ca.crt
- name: prod-cluster
  cluster:
    server: https://prod.example:6443
    certificate-authority-data: aGVsbG8gQ0E=
    insecure-skip-tls-verify: false
- name: lab-cluster
  cluster:
    server: https://lab.example
    insecure-skip-tls-verify: true
users:
- name: dev-user
  user:
    client-certificate: certs/client.crt
    client-key: /abs/client.key
- name: prod-user
  user:
    token: prod-token
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
- name: lab-user
  user:
    tokenFile: token
- name: exec-user
  user:
    exec:
      command: aws
contexts:
- name: dev
  context: {cluster: dev-cluster, user: dev-user, namespace: egw-system}
- name: prod
  context: {cluster: prod-cluster, user: prod-user}
- name: lab
  context: {cluster: lab-cluster, user: lab-user}
- name: exec
  context: {cluster: lab-cluster, user: exec-user}
- name: broken
  context: {cluster: nowhere, user: dev-user}
)";

TEST(Kubeconfig, CurrentContextWithFilesRelativeToTheKubeconfig) {
    TempDir d;
    d.write("config", kKubeconfig);
    Credentials c = from_kubeconfig(d.file("config"));
    EXPECT_EQ(c.server, "https://dev.example:6443");
    EXPECT_EQ(c.ca_file, d.file("certs/ca.crt"));
    EXPECT_EQ(c.client_cert_file, d.file("certs/client.crt"));
    EXPECT_EQ(c.client_key_file, "/abs/client.key");
    EXPECT_EQ(c.namespace_, "egw-system");
    EXPECT_TRUE(c.token.empty());
    EXPECT_NE(c.source.find("context dev"), std::string::npos);
}

TEST(Kubeconfig, InlineDataAndToken) {
    TempDir d;
    d.write("config", kKubeconfig);
    Credentials c = from_kubeconfig(d.file("config"), "prod");
    EXPECT_EQ(c.ca_pem, "hello CA");
    EXPECT_EQ(c.client_cert_pem, "cert");
    EXPECT_EQ(c.client_key_pem, "key");
    EXPECT_EQ(c.token, "prod-token");
    EXPECT_FALSE(c.insecure_skip_tls_verify);
}

TEST(Kubeconfig, InsecureAndTokenFile) {
    TempDir d;
    d.write("config", kKubeconfig);
    Credentials c = from_kubeconfig(d.file("config"), "lab");
    EXPECT_TRUE(c.insecure_skip_tls_verify);
    EXPECT_EQ(c.token_file, d.file("token"));
}

// What `load` throws, "" when it does not.
std::string error_of(const std::function<void()>& load) {
    try {
        load();
    } catch (const CredentialError& e) {
        return e.what();
    }
    return "";
}

TEST(Kubeconfig, ErrorsNameTheProblem) {
    TempDir d;
    d.write("config", kKubeconfig);
    const std::string config = d.file("config");
    EXPECT_EQ(
        error_of([&] { from_kubeconfig(config, "exec"); }),
        config + ": users[exec-user].user.exec: not supported by egw; use a token, tokenFile or a client certificate");
    EXPECT_EQ(error_of([&] { from_kubeconfig(config, "broken"); }),
              config + ": contexts[broken].context.cluster: cluster \"nowhere\" is not defined");
    EXPECT_EQ(error_of([&] { from_kubeconfig(config, "missing"); }), config + ": context \"missing\" is not defined");
    EXPECT_EQ(error_of([&] { from_kubeconfig(d.file("absent")); }), "cannot read kubeconfig " + d.file("absent"));
    // yaml-cpp's own words follow; the prefix is ours.
    d.write("bad", "clusters: [unclosed\n");
    const std::string bad = error_of([&] { from_kubeconfig(d.file("bad")); });
    EXPECT_TRUE(bad.starts_with(d.file("bad") + ": not valid YAML: ")) << bad;
    EXPECT_GT(bad.size(), (d.file("bad") + ": not valid YAML: ").size()) << bad;
}

TEST(Kubeconfig, SeveralFilesFirstDefinitionWins) {
    TempDir d;
    d.write("a", R"(current-context: mine
clusters:
- name: c
  cluster: {server: "https://first:443"}
)");
    d.write("b", R"(current-context: other
clusters:
- name: c
  cluster: {server: "https://second:443"}
users:
- name: u
  user: {token: t}
contexts:
- name: mine
  context: {cluster: c, user: u}
)");
    Credentials c = from_kubeconfig(d.file("a") + ":" + d.file("missing") + ":" + d.file("b"));
    EXPECT_EQ(c.server, "https://first:443");
    EXPECT_EQ(c.token, "t");
}

TEST(Credentials, LoadPrefersFlagThenKubeconfigVariableThenInClusterThenHome) {
    TempDir d;
    d.write("config", kKubeconfig);
    d.write("other",
            "current-context: x\nclusters: [{name: c, cluster: {server: 'http://flag:1'}}]\n"
            "contexts: [{name: x, context: {cluster: c}}]\n");
    std::filesystem::create_directories(d.file("home/.kube"));
    d.write("home/.kube/config",
            "current-context: h\nclusters: [{name: c, cluster: {server: 'http://home:1'}},"
            " {name: c2, cluster: {server: 'http://home:2'}}]\n"
            "contexts: [{name: h, context: {cluster: c}}, {name: h2, context: {cluster: c2}}]\n");
    ScopedEnv home("HOME", d.file("home").c_str());
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "8443");
    {
        // In a pod, with $KUBECONFIG set: the flag, else $KUBECONFIG.
        ScopedEnv kc("KUBECONFIG", d.file("config").c_str());
        EXPECT_EQ(load_credentials(d.file("other")).server, "http://flag:1");
        EXPECT_EQ(load_credentials("", "prod").server, "https://prod.example:6443");
    }
    ScopedEnv kc("KUBECONFIG", nullptr);
    // No $KUBECONFIG: the pod's service account, before ~/.kube/config. load_credentials reads it
    // at its fixed path; outside a pod (where the tests run) that file is missing, and the error
    // names it.
    const InClusterPaths pod;
    if (std::ifstream(pod.token_file)) {
        Credentials c = load_credentials();
        EXPECT_EQ(c.source, "in-cluster");
        EXPECT_EQ(c.server, "https://10.96.0.1:8443");
    } else {
        EXPECT_EQ(error_of([] { load_credentials(); }), "cannot read service-account token " + pod.token_file);
    }
    // Not in a pod either: ~/.kube/config, with the context asked for.
    ScopedEnv no_host("KUBERNETES_SERVICE_HOST", nullptr);
    EXPECT_EQ(load_credentials().server, "http://home:1");
    EXPECT_EQ(load_credentials("", "h2").server, "http://home:2");
    ScopedEnv no_home("HOME", nullptr);
    EXPECT_EQ(error_of([] { load_credentials(); }), "no kubeconfig given, not in a cluster, and $HOME is not set");
}

TEST(InCluster, FromEnvironmentAndServiceAccountFiles) {
    TempDir d;
    d.write("token", "sa-token\n");
    d.write("ca.crt", "CA");
    d.write("namespace", "egw-system\n");
    InClusterPaths p{d.file("token"), d.file("ca.crt"), d.file("namespace")};
    {
        ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00::1");
        ScopedEnv port("KUBERNETES_SERVICE_PORT", "8443");
        Credentials c = in_cluster(p);
        EXPECT_EQ(c.server, "https://[fd00::1]:8443");
        EXPECT_EQ(c.token_file, d.file("token"));
        EXPECT_EQ(c.ca_file, d.file("ca.crt"));
        EXPECT_EQ(c.namespace_, "egw-system");
        EXPECT_EQ(c.source, "in-cluster");
    }
    {
        ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
        EXPECT_THROW(in_cluster(p), CredentialError);
    }
    {
        ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
        ScopedEnv port("KUBERNETES_SERVICE_PORT", nullptr);
        ScopedEnv https("KUBERNETES_SERVICE_PORT_HTTPS", nullptr);
        EXPECT_EQ(in_cluster(p).server, "https://10.96.0.1:443");
        d.write("token", "");
        EXPECT_THROW(in_cluster(p), CredentialError);
    }
}

}  // namespace
}  // namespace egw::k8s
