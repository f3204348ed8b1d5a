// SPDX-License-Identifier: Apache-2.0
#include "control/k8s/credentials.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace egw::k8s {

namespace {

std::string read_file(const std::string& path, const char* what) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw CredentialError(std::string("cannot read ") + what + " " + path);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string trim(std::string s) {
    const char* ws = " \t\r\n";
    s.erase(s.find_last_not_of(ws) + 1);
    s.erase(0, s.find_first_not_of(ws) == std::string::npos ? s.size() : s.find_first_not_of(ws));
    return s;
}

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string dir_of(const std::string& path) {
    auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

std::string resolve(const std::string& dir, const std::string& file) {
    if (file.empty() || file[0] == '/') return file;
    if (file.rfind("~/", 0) == 0 && !env("HOME").empty()) return env("HOME") + file.substr(1);
    return dir + "/" + file;
}

// One named entry of clusters/users/contexts, with the directory of the file it came from.
struct Entry {
    YAML::Node node;
    std::string file;
};

struct Kubeconfig {
    std::map<std::string, Entry> clusters, users, contexts;
    std::string current_context;
    std::string first_file;
};

void collect(const YAML::Node& list, const char* section, const char* inner, const std::string& file,
             std::map<std::string, Entry>& out) {
    if (!list) return;
    if (!list.IsSequence()) throw CredentialError(file + ": " + section + ": expected a list");
    size_t i = 0;
    for (const auto& item : list) {
        const std::string where = file + ": " + section + "[" + std::to_string(i++) + "]";
        if (!item.IsMap() || !item["name"] || !item["name"].IsScalar())
            throw CredentialError(where + ".name: required field is missing");
        const auto name = item["name"].as<std::string>();
        const YAML::Node body = item[inner];
        if (body && !body.IsMap()) throw CredentialError(where + "." + inner + ": expected a mapping");
        out.emplace(name, Entry{body ? body : YAML::Node(YAML::NodeType::Map), file});
    }
}

Kubeconfig parse_files(const std::string& paths) {
    Kubeconfig kc;
    std::stringstream ss(paths);
    std::string file;
    int loaded = 0;
    while (std::getline(ss, file, ':')) {
        if (file.empty()) continue;
        if (loaded > 0) {
            std::ifstream probe(file);
            if (!probe) continue;  // like kubectl, missing files in a list are skipped
        }
        YAML::Node root;
        try {
            root = YAML::Load(read_file(file, "kubeconfig"));
        } catch (const YAML::Exception& e) {
            throw CredentialError(file + ": not valid YAML: " + e.what());
        }
        if (!root.IsMap()) throw CredentialError(file + ": expected a kubeconfig mapping");
        collect(root["clusters"], "clusters", "cluster", file, kc.clusters);
        collect(root["users"], "users", "user", file, kc.users);
        collect(root["contexts"], "contexts", "context", file, kc.contexts);
        if (kc.current_context.empty() && root["current-context"] && root["current-context"].IsScalar())
            kc.current_context = root["current-context"].as<std::string>();
        if (kc.first_file.empty()) kc.first_file = file;
        ++loaded;
    }
    if (loaded == 0) throw CredentialError("no kubeconfig file in \"" + paths + "\"");
    return kc;
}

std::string scalar(const Entry& e, const char* key, const std::string& where) {
    const YAML::Node v = e.node[key];
    if (!v || v.IsNull()) return "";
    if (!v.IsScalar()) throw CredentialError(e.file + ": " + where + "." + key + ": expected a string");
    return v.as<std::string>();
}

}  // namespace

std::string base64_decode(std::string_view in) {
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+' || c == '-') return 62;
        if (c == '/' || c == '_') return 63;
        return -1;
    };
    std::string out;
    out.reserve(in.size() * 3 / 4);
    unsigned acc = 0;
    int bits = 0;
    for (char c : in) {
        if (c == '=' || c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        int v = value(c);
        if (v < 0) throw CredentialError(std::string("invalid base64 character '") + c + "'");
        acc = (acc << 6) | static_cast<unsigned>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((acc >> bits) & 0xff));
        }
    }
    return out;
}

Credentials in_cluster(const InClusterPaths& paths) {
    std::string host = env("KUBERNETES_SERVICE_HOST");
    std::string port = env("KUBERNETES_SERVICE_PORT");
    if (port.empty()) port = env("KUBERNETES_SERVICE_PORT_HTTPS");
    if (port.empty()) port = "443";
    if (host.empty()) throw CredentialError("in-cluster: KUBERNETES_SERVICE_HOST is not set (not running in a pod?)");
    if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
    Credentials c;
    c.server = "https://" + host + ":" + port;
    c.token_file = paths.token_file;
    if (trim(read_file(paths.token_file, "service-account token")).empty())
        throw CredentialError("in-cluster: the service-account token " + paths.token_file + " is empty");
    c.ca_file = paths.ca_file;
    {
        std::ifstream probe(paths.ca_file);
        if (!probe) throw CredentialError("in-cluster: cannot read the service-account CA " + paths.ca_file);
    }
    std::ifstream ns(paths.namespace_file);
    if (ns) {
        std::ostringstream s;
        s << ns.rdbuf();
        c.namespace_ = trim(s.str());
    }
    c.source = "in-cluster";
    return c;
}

Credentials from_kubeconfig(const std::string& path, const std::string& context) {
    Kubeconfig kc = parse_files(path);
    const std::string ctx_name = context.empty() ? kc.current_context : context;
    if (ctx_name.empty()) throw CredentialError(kc.first_file + ": no current-context and no context given");
    auto ctx = kc.contexts.find(ctx_name);
    if (ctx == kc.contexts.end())
        throw CredentialError(kc.first_file + ": context \"" + ctx_name + "\" is not defined");
    const std::string cwhere = "contexts[" + ctx_name + "].context";
    const std::string cluster_name = scalar(ctx->second, "cluster", cwhere);
    const std::string user_name = scalar(ctx->second, "user", cwhere);
    auto cl = kc.clusters.find(cluster_name);
    if (cl == kc.clusters.end())
        throw CredentialError(ctx->second.file + ": " + cwhere + ".cluster: cluster \"" + cluster_name +
                              "\" is not defined");

    Credentials c;
    c.source = "kubeconfig " + kc.first_file + " context " + ctx_name;
    c.namespace_ = scalar(ctx->second, "namespace", cwhere);

    const std::string kwhere = "clusters[" + cluster_name + "].cluster";
    const Entry& cluster = cl->second;
    const std::string cdir = dir_of(cluster.file);
    c.server = scalar(cluster, "server", kwhere);
    if (c.server.empty()) throw CredentialError(cluster.file + ": " + kwhere + ".server: required field is missing");
    while (!c.server.empty() && c.server.back() == '/')
        c.server.pop_back();
    c.ca_file = resolve(cdir, scalar(cluster, "certificate-authority", kwhere));
    if (auto data = scalar(cluster, "certificate-authority-data", kwhere); !data.empty()) {
        try {
            c.ca_pem = base64_decode(data);
        } catch (const CredentialError& e) {
            throw CredentialError(cluster.file + ": " + kwhere + ".certificate-authority-data: " + e.what());
        }
    }
    if (auto v = cluster.node["insecure-skip-tls-verify"]; v && !v.IsNull()) {
        try {
            c.insecure_skip_tls_verify = v.as<bool>();
        } catch (const YAML::Exception&) {
            throw CredentialError(cluster.file + ": " + kwhere + ".insecure-skip-tls-verify: expected true or false");
        }
    }

    if (user_name.empty()) return c;  // anonymous
    auto us = kc.users.find(user_name);
    if (us == kc.users.end())
        throw CredentialError(ctx->second.file + ": " + cwhere + ".user: user \"" + user_name + "\" is not defined");
    const Entry& user = us->second;
    const std::string udir = dir_of(user.file);
    const std::string uwhere = "users[" + user_name + "].user";
    auto decode = [&](const char* key) {
        auto data = scalar(user, key, uwhere);
        if (data.empty()) return data;
        try {
            return base64_decode(data);
        } catch (const CredentialError& e) {
            throw CredentialError(user.file + ": " + uwhere + "." + key + ": " + e.what());
        }
    };
    c.token = scalar(user, "token", uwhere);
    c.token_file = resolve(udir, scalar(user, "tokenFile", uwhere));
    c.client_cert_file = resolve(udir, scalar(user, "client-certificate", uwhere));
    c.client_cert_pem = decode("client-certificate-data");
    c.client_key_file = resolve(udir, scalar(user, "client-key", uwhere));
    c.client_key_pem = decode("client-key-data");
    const bool has_cert = !c.client_cert_file.empty() || !c.client_cert_pem.empty();
    const bool has_key = !c.client_key_file.empty() || !c.client_key_pem.empty();
    if (has_cert != has_key)
        throw CredentialError(user.file + ": " + uwhere + ": a client certificate needs its key and the reverse");
    const bool has_any = has_cert || !c.token.empty() || !c.token_file.empty();
    if (!has_any) {
        for (const char* unsupported : {"exec", "auth-provider", "username"}) {
            if (user.node[unsupported])
                throw CredentialError(user.file + ": " + uwhere + "." + unsupported +
                                      ": not supported by egw; use a token, tokenFile or a client certificate");
        }
    }
    return c;
}

Credentials load_credentials(const std::string& kubeconfig, const std::string& context) {
    if (!kubeconfig.empty()) return from_kubeconfig(kubeconfig, context);
    if (auto kc = env("KUBECONFIG"); !kc.empty()) return from_kubeconfig(kc, context);
    if (!env("KUBERNETES_SERVICE_HOST").empty()) return in_cluster();
    auto home = env("HOME");
    if (home.empty()) throw CredentialError("no kubeconfig given, not in a cluster, and $HOME is not set");
    return from_kubeconfig(home + "/.kube/config", context);
}

}  // namespace egw::k8s
