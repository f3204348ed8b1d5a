// SPDX-License-Identifier: Apache-2.0
#include "control/k8s/http.h"

#include <curl/curl.h>
#include <signal.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "control/k8s/log.h"

namespace egw::k8s {

namespace {

std::once_flag g_curl_init;

std::string read_token_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return "";
    std::ostringstream ss;
    ss << f.rdbuf();
    std::string t = ss.str();
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' '))
        t.pop_back();
    return t;
}

const char* reason_phrase(long status) {
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Entity";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "";
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

ApiStatus api_status(const nlohmann::json& s, long http_status) {
    ApiStatus st;
    st.code = http_status;
    if (!s.is_object()) return st;
    if (auto it = s.find("code"); it != s.end() && it->is_number_integer()) st.code = it->get<long>();
    if (auto it = s.find("reason"); it != s.end() && it->is_string()) st.reason = it->get<std::string>();
    if (auto it = s.find("message"); it != s.end() && it->is_string()) st.message = it->get<std::string>();
    return st;
}

ApiStatus api_status(const Response& r) {
    nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    ApiStatus st = api_status(j.is_discarded() ? nlohmann::json() : j, r.status);
    if (j.is_discarded() || !j.is_object()) {
        st.code = r.status;
        st.message = r.body.substr(0, 200);
        while (!st.message.empty() && (st.message.back() == '\n' || st.message.back() == '\r'))
            st.message.pop_back();
    }
    return st;
}

std::string describe(const Response& r) {
    if (r.cancelled) return "cancelled";
    if (r.status == 0) return "transport: " + (r.error.empty() ? std::string("no response") : r.error);
    std::string out = "HTTP " + std::to_string(r.status);
    if (!r.error.empty()) return out + ", then transport: " + r.error;
    ApiStatus st = api_status(r);
    if (!st.reason.empty()) {
        out += " " + st.reason;
    } else if (*reason_phrase(r.status)) {
        out += std::string(" ") + reason_phrase(r.status);
    }
    if (!st.message.empty()) out += ": " + st.message;
    return out;
}

std::string explain(const Response& r, const std::string& credentials_source) {
    std::string s = describe(r);
    if (r.status == 401)
        s += " (the API server rejected the credentials from " + credentials_source + ")";
    else if (r.status == 403)
        s += " (egwd's RBAC does not allow this; see docs/kubernetes.md)";
    return s;
}

std::string url_encode(std::string_view s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('%');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------

void Cancel::cancel() {
    cancelled_ = true;
    std::lock_guard lk(mu_);
    for (void* m : active_)
        curl_multi_wakeup(static_cast<CURLM*>(m));
}

void Cancel::attach(void* multi) {
    std::lock_guard lk(mu_);
    active_.insert(multi);
}

void Cancel::detach(void* multi) {
    std::lock_guard lk(mu_);
    active_.erase(multi);
}

// ---------------------------------------------------------------------------------------------

struct Transport::Call {
    std::string method;
    std::string url;
    std::string body;
    std::string content_type;
    std::string token;
    std::chrono::milliseconds timeout{0};
    bool streaming = false;
    const std::function<void(long)>* on_response = nullptr;
    const std::function<bool(std::string_view)>* on_data = nullptr;
    Cancel* cancel = nullptr;
    // Filled while the transfer runs.
    long status = 0;
    bool headers_done = false;
    bool stopped_by_callback = false;
    std::string out;
    CURL* easy = nullptr;
};

namespace {

size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* call = static_cast<Transport::Call*>(user);
    const size_t len = size * n;
    if (len <= 2 && (len == 0 || data[0] == '\r' || data[0] == '\n')) {
        long code = 0;
        curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200 && !call->headers_done) {  // not a 1xx interim response
            call->headers_done = true;
            call->status = code;
            try {
                if (call->on_response && *call->on_response) (*call->on_response)(code);
            } catch (...) {  // nothing may unwind through libcurl
                call->stopped_by_callback = true;
                return 0;
            }
        }
    }
    return len;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* call = static_cast<Transport::Call*>(user);
    const size_t len = size * n;
    if (call->streaming && call->status >= 200 && call->status < 300 && call->on_data) {
        bool more = false;
        try {
            more = (*call->on_data)(std::string_view(data, len));
        } catch (...) {  // nothing may unwind through libcurl
            more = false;
        }
        if (!more) {
            call->stopped_by_callback = true;
            return 0;  // aborts the transfer
        }
        return len;
    }
    call->out.append(data, len);
    return len;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* call = static_cast<Transport::Call*>(user);
    return call->cancel && call->cancel->cancelled() ? 1 : 0;
}

void lock_cb(CURL*, curl_lock_data data, curl_lock_access, void* user) {
    static_cast<std::mutex*>(user)[data % CURL_LOCK_DATA_LAST].lock();
}

void unlock_cb(CURL*, curl_lock_data data, void* user) {
    static_cast<std::mutex*>(user)[data % CURL_LOCK_DATA_LAST].unlock();
}

void set_blob(CURL* h, CURLoption opt, const std::string& pem) {
    curl_blob blob{};
    blob.data = const_cast<char*>(pem.data());
    blob.len = pem.size();
    blob.flags = CURL_BLOB_COPY;
    curl_easy_setopt(h, opt, &blob);
}

}  // namespace

Transport::Transport(Credentials creds, HttpOptions opts) : creds_(std::move(creds)), opts_(std::move(opts)) {
    std::call_once(g_curl_init, [] {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        // With CURLOPT_NOSIGNAL libcurl leaves SIGPIPE alone, and OpenSSL writing to a connection
        // the server closed would raise it and end the process. Ignore it unless someone chose
        // a handler already.
        struct sigaction old {};
        if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
    });
    static_assert(CURL_LOCK_DATA_LAST <= 8, "share_mu_ needs one mutex per curl_lock_data");
    if (creds_.server.empty()) throw CredentialError("no API server URL in the credentials");
    for (const auto* f : {&creds_.ca_file, &creds_.client_cert_file, &creds_.client_key_file}) {
        if (f->empty()) continue;
        std::ifstream probe(*f);
        if (!probe) throw CredentialError("cannot read " + *f + " (from " + creds_.source + ")");
    }
    if (!creds_.token_file.empty()) {
        token_ = read_token_file(creds_.token_file);
        token_read_ = std::chrono::steady_clock::now();
        if (token_.empty()) throw CredentialError("cannot read a token from " + creds_.token_file);
    } else {
        token_ = creds_.token;
    }
    CURLSH* sh = curl_share_init();
    curl_share_setopt(sh, CURLSHOPT_LOCKFUNC, lock_cb);
    curl_share_setopt(sh, CURLSHOPT_UNLOCKFUNC, unlock_cb);
    curl_share_setopt(sh, CURLSHOPT_USERDATA, share_mu_);
    // Connections are not shared: libcurl does not support sharing them between threads.
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    share_ = sh;
}

Transport::~Transport() {
    std::lock_guard lk(pool_mu_);
    for (void* h : pool_)
        curl_easy_cleanup(static_cast<CURL*>(h));
    pool_.clear();
    curl_share_cleanup(static_cast<CURLSH*>(share_));
}

std::string Transport::token() {
    std::lock_guard lk(token_mu_);
    if (!creds_.token_file.empty() && std::chrono::steady_clock::now() - token_read_ >= opts_.token_reload_period) {
        std::string t = read_token_file(creds_.token_file);
        token_read_ = std::chrono::steady_clock::now();
        if (!t.empty()) token_ = t;
    }
    return token_;
}

bool Transport::reload_token() {
    if (creds_.token_file.empty()) return false;
    std::lock_guard lk(token_mu_);
    std::string t = read_token_file(creds_.token_file);
    token_read_ = std::chrono::steady_clock::now();
    ++token_reloads_;
    if (t.empty() || t == token_) return false;
    token_ = t;
    logger()->info("k8s: re-read the bearer token from {}", creds_.token_file);
    return true;
}

Transport::Stats Transport::stats() const {
    return Stats{requests_.load(), unauthorized_.load(), token_reloads_.load()};
}

Response Transport::request(std::string_view method, const std::string& path, const std::string& body,
                            const std::string& content_type, Cancel* cancel, std::chrono::milliseconds timeout) {
    for (int attempt = 0;; ++attempt) {
        Call call;
        call.method = std::string(method);
        call.url = creds_.server + path;
        call.body = body;
        call.content_type = content_type;
        call.token = token();
        call.timeout = timeout.count() > 0 ? timeout : opts_.request_timeout;
        call.cancel = cancel;
        Response r = perform(call, cancel);
        if (r.status == 401 && attempt == 0 && reload_token()) continue;
        if (r.status >= 200 && r.status < 300) answers_.fetch_add(1, std::memory_order_relaxed);
        return r;
    }
}

Response Transport::stream(const std::string& path, const std::function<void(long)>& on_response,
                           const std::function<bool(std::string_view)>& on_data, std::chrono::milliseconds timeout,
                           Cancel* cancel) {
    for (int attempt = 0;; ++attempt) {
        Call call;
        call.method = "GET";
        call.url = creds_.server + path;
        call.token = token();
        call.timeout = timeout;
        call.streaming = true;
        std::function<void(long)> respond = [&](long status) {
            // A 401 that will be retried with a fresh token is not reported.
            if (status == 401 && attempt == 0 && !creds_.token_file.empty()) return;
            if (status >= 200 && status < 300) answers_.fetch_add(1, std::memory_order_relaxed);
            if (on_response) on_response(status);
        };
        call.on_response = &respond;
        call.on_data = &on_data;
        call.cancel = cancel;
        Response r = perform(call, cancel);
        if (r.status == 401 && attempt == 0 && reload_token()) continue;
        if (r.status == 401 && attempt == 0 && !creds_.token_file.empty() && on_response) on_response(401);
        return r;
    }
}

Response Transport::perform(Call& call, Cancel* cancel) {
    ++requests_;
    Response r;
    if (cancel && cancel->cancelled()) {
        r.cancelled = true;
        return r;
    }
    CURL* h = nullptr;
    if (!call.streaming) {
        std::lock_guard lk(pool_mu_);
        if (!pool_.empty()) {
            h = static_cast<CURL*>(pool_.back());
            pool_.pop_back();
        }
    }
    if (h) {
        curl_easy_reset(h);
    } else {
        h = curl_easy_init();
        if (!h) {
            r.error = "curl_easy_init failed";
            return r;
        }
    }
    call.easy = h;
    char errbuf[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(h, CURLOPT_URL, call.url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, opts_.user_agent.c_str());
    curl_easy_setopt(h, CURLOPT_SHARE, static_cast<CURLSH*>(share_));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(opts_.connect_timeout.count()));
    if (call.timeout.count() > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(call.timeout.count()));
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 10L);
    if (!call.streaming) curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &call);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &call);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &call);

    // TLS.
    if (creds_.insecure_skip_tls_verify) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    } else {
        if (!creds_.ca_pem.empty())
            set_blob(h, CURLOPT_CAINFO_BLOB, creds_.ca_pem);
        else if (!creds_.ca_file.empty())
            curl_easy_setopt(h, CURLOPT_CAINFO, creds_.ca_file.c_str());
    }
    if (!creds_.client_cert_pem.empty())
        set_blob(h, CURLOPT_SSLCERT_BLOB, creds_.client_cert_pem);
    else if (!creds_.client_cert_file.empty())
        curl_easy_setopt(h, CURLOPT_SSLCERT, creds_.client_cert_file.c_str());
    if (!creds_.client_key_pem.empty())
        set_blob(h, CURLOPT_SSLKEY_BLOB, creds_.client_key_pem);
    else if (!creds_.client_key_file.empty())
        curl_easy_setopt(h, CURLOPT_SSLKEY, creds_.client_key_file.c_str());
    if (!creds_.client_cert_pem.empty() || !creds_.client_cert_file.empty()) {
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }

    // Method, headers, body.
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Accept: application/json");
    headers = curl_slist_append(headers, "Expect:");
    std::string auth;
    if (!call.token.empty()) {
        auth = "Authorization: Bearer " + call.token;
        headers = curl_slist_append(headers, auth.c_str());
    }
    std::string ctype;
    if (!call.content_type.empty()) {
        ctype = "Content-Type: " + call.content_type;
        headers = curl_slist_append(headers, ctype.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (call.method == "GET") {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else {
        if (call.method != "POST") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, call.method.c_str());
        if (call.method != "DELETE" || !call.body.empty()) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(call.body.size()));
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, call.body.c_str());
        }
    }

    CURLcode rc = CURLE_OK;
    if (!call.streaming) {
        rc = curl_easy_perform(h);
    } else {
        // A multi handle, so that a Cancel wakes the wait at once.
        CURLM* m = curl_multi_init();
        curl_multi_add_handle(m, h);
        if (cancel) cancel->attach(m);
        int running = 1;
        while (running) {
            if (cancel && cancel->cancelled()) break;
            CURLMcode mc = curl_multi_perform(m, &running);
            if (mc != CURLM_OK) {
                r.error = curl_multi_strerror(mc);
                break;
            }
            if (!running) break;
            curl_multi_poll(m, nullptr, 0, 1000, nullptr);
        }
        rc = CURLE_OK;
        int left = 0;
        bool finished = false;
        while (CURLMsg* msg = curl_multi_info_read(m, &left)) {
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == h) {
                rc = msg->data.result;
                finished = true;
            }
        }
        if (!finished && r.error.empty()) rc = CURLE_ABORTED_BY_CALLBACK;
        if (cancel) cancel->detach(m);
        curl_multi_remove_handle(m, h);
        curl_multi_cleanup(m);
    }
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);

    r.status = code;
    r.body = std::move(call.out);
    if (rc != CURLE_OK && r.error.empty()) {
        if (call.stopped_by_callback || (cancel && cancel->cancelled())) {
            r.cancelled = true;
        } else {
            r.error = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
            while (!r.error.empty() && r.error.back() == '\n')
                r.error.pop_back();
        }
    }
    if (code == 401) ++unauthorized_;

    if (!call.streaming && rc == CURLE_OK) {
        std::lock_guard lk(pool_mu_);
        if (pool_.size() < 16) {
            pool_.push_back(h);
            h = nullptr;
        }
    }
    if (h) curl_easy_cleanup(h);
    return r;
}

}  // namespace egw::k8s
