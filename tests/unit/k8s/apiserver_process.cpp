// SPDX-License-Identifier: Apache-2.0
#include "apiserver_process.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <spdlog/sinks/stdout_sinks.h>

#include "control/k8s/log.h"

namespace egw::k8s::testing {

using nlohmann::json;

std::string source_root() {
    const char* r = std::getenv("EGW_SOURCE_ROOT");
    return r ? r : "";
}

TempDir::TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/egw-k8s-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

void TempDir::write(const std::string& name, const std::string& content) const {
    std::ofstream f(file(name), std::ios::binary | std::ios::trunc);
    f << content;
    if (!f) throw std::runtime_error("cannot write " + file(name));
}

ApiServerProcess::ApiServerProcess(std::vector<std::string> args) {
    const std::string root = source_root();
    if (root.empty()) throw std::runtime_error("EGW_SOURCE_ROOT is not set (run the tests with meson test)");
    const std::string script = root + "/tests/apiserver/apiserver.py";
    const std::string port_file = dir_.file("port");
    std::vector<std::string> argv = {"python3", script, "--port", "0", "--port-file", port_file};
    for (auto& a : args) {
        if (a == "--tls-cert") tls_ = true;
        argv.push_back(a);
    }
    std::vector<char*> cargv;  // built before fork: the child only calls async-signal-safe functions
    for (auto& a : argv)
        cargv.push_back(a.data());
    cargv.push_back(nullptr);
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
        execvp("python3", cargv.data());
        _exit(127);
    }
    // Python's start under a loaded machine, not the server, sets how long this takes.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
        std::ifstream f(port_file);
        if (f >> port_ && port_ > 0) return;
        int st = 0;
        if (waitpid(pid_, &st, WNOHANG) == pid_) {
            pid_ = -1;
            throw std::runtime_error("apiserver.py exited at start");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    throw std::runtime_error("apiserver.py did not write its port in time");
}

ApiServerProcess::~ApiServerProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 300; ++i) {
        if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
}

std::string ApiServerProcess::url() const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

namespace {
size_t collect(char* data, size_t size, size_t n, void* user) {
    static_cast<std::string*>(user)->append(data, size * n);
    return size * n;
}
}  // namespace

ApiServerProcess::Reply ApiServerProcess::call(const std::string& method, const std::string& path,
                                               const std::string& body, const std::string& content_type,
                                               const std::string& token) const {
    CURL* h = curl_easy_init();
    std::string out;
    const std::string u = url() + path;
    curl_easy_setopt(h, CURLOPT_URL, u.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 15000L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
    curl_slist* headers = nullptr;
    const std::string ct = "Content-Type: " + content_type;
    const std::string auth = "Authorization: Bearer " + token;
    headers = curl_slist_append(headers, "Expect:");
    if (!body.empty()) headers = curl_slist_append(headers, ct.c_str());
    if (!token.empty()) headers = curl_slist_append(headers, auth.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (method != "GET") {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
    }
    CURLcode rc = curl_easy_perform(h);
    Reply r;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) throw std::runtime_error(std::string("test request failed: ") + curl_easy_strerror(rc));
    r.body = json::parse(out, nullptr, false);
    return r;
}

json ApiServerProcess::control(const std::string& what, const json& body) const {
    Reply r = call("POST", "/_test/" + what, body.dump());
    if (r.status != 200) throw std::runtime_error("/_test/" + what + " answered " + std::to_string(r.status));
    return r.body;
}

json ApiServerProcess::control_get(const std::string& what) const {
    Reply r = call("GET", "/_test/" + what);
    if (r.status != 200) throw std::runtime_error("/_test/" + what + " answered " + std::to_string(r.status));
    return r.body;
}

std::vector<json> ApiServerProcess::requests(const std::string& verb, const std::string& path) const {
    std::vector<json> out;
    const json log = control_get("requests");
    for (const auto& r : log["requests"]) {
        if (r["verb"] == verb && r["path"].get<std::string>().find(path) != std::string::npos) out.push_back(r);
    }
    return out;
}

void CaptureSink::sink_it_(const spdlog::details::log_msg& msg) {
    lines_.emplace_back(msg.level, std::string(msg.payload.begin(), msg.payload.end()));
}

size_t CaptureSink::count(spdlog::level::level_enum level, const std::string& needle) {
    std::lock_guard lk(mutex_);
    size_t n = 0;
    for (auto& [l, text] : lines_)
        if (l >= level && text.find(needle) != std::string::npos) ++n;
    return n;
}

std::vector<std::string> CaptureSink::lines(spdlog::level::level_enum level) {
    std::lock_guard lk(mutex_);
    std::vector<std::string> out;
    for (auto& [l, text] : lines_)
        if (l >= level) out.push_back(text);
    return out;
}

LogCapture::LogCapture() : sink_(std::make_shared<CaptureSink>()) {
    auto err = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    err->set_level(spdlog::level::warn);
    auto l = std::make_shared<spdlog::logger>("k8s-test", spdlog::sinks_init_list{sink_, err});
    l->set_level(spdlog::level::debug);
    set_logger(l);
}

LogCapture::~LogCapture() {
    set_logger(nullptr);
}

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (cond()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return cond();
}

json node(const std::string& name, const json& labels, bool ready) {
    return {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", labels}}},
            {"status",
             {{"conditions", json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})},
              {"addresses", json::array({{{"type", "InternalIP"}, {"address", "192.168.0.10"}}})}}}};
}

json service(const std::string& ns, const std::string& name, const std::string& ingress_ip) {
    return {{"apiVersion", "v1"},
            {"kind", "Service"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec", {{"type", "LoadBalancer"}, {"clusterIPs", {"10.96.0.10"}}}},
            {"status", {{"loadBalancer", {{"ingress", json::array({{{"ip", ingress_ip}}})}}}}}};
}

json endpoint_slice(const std::string& ns, const std::string& name, const std::string& svc, const std::string& ip,
                    const std::string& node_name) {
    return {{"apiVersion", "discovery.k8s.io/v1"},
            {"kind", "EndpointSlice"},
            {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"kubernetes.io/service-name", svc}}}}},
            {"addressType", "IPv4"},
            {"endpoints", json::array({{{"addresses", {ip}}, {"nodeName", node_name}}})}};
}

json egress_service(const std::string& ns, const std::string& name, const std::string& network) {
    json spec = {{"sourceIPBy", "LoadBalancerIP"}, {"nodeSelector", {{"matchLabels", {{"egw", "gateway"}}}}}};
    if (!network.empty()) spec["network"] = network;
    return {{"apiVersion", "k8s.ovn.org/v1"},
            {"kind", "EgressService"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec", spec}};
}

json lease(const std::string& ns, const std::string& name, const std::string& holder) {
    return {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec", {{"holderIdentity", holder}, {"leaseDurationSeconds", 15}}}};
}

std::string base64_encode(const std::string& in) {
    static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
                     static_cast<unsigned char>(in[i + 2]);
        out += a[v >> 18];
        out += a[(v >> 12) & 63];
        out += a[(v >> 6) & 63];
        out += a[v & 63];
    }
    if (i < in.size()) {
        unsigned v = static_cast<unsigned char>(in[i]) << 16;
        if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
        out += a[v >> 18];
        out += a[(v >> 12) & 63];
        out += i + 1 < in.size() ? a[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

}  // namespace egw::k8s::testing
