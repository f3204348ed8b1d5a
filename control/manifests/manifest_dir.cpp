// SPDX-License-Identifier: Apache-2.0
//
// The `files` state source. See manifest_dir.h.
#include "control/manifests/manifest_dir.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

namespace egw::manifests {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// ---- YAML to JSON ----

std::string at(const YAML::Mark& m) {
    if (m.is_null()) return "";
    return "line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1) + ": ";
}

[[noreturn]] void yaml_fail(const YAML::Node& n, const std::string& msg) {
    throw std::runtime_error(at(n.Mark()) + msg);
}

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), as JSON strings
// must be. yaml-cpp passes other bytes through, and "\uD800" escapes become surrogates.
bool valid_utf8(const std::string& s) {
    size_t i = 0;
    const size_t n = s.size();
    while (i < n) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t len;
        uint32_t cp;
        if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else
            return false;
        if (n - i < len) return false;
        for (size_t k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xc0) != 0x80) return false;
            cp = cp << 6 | (cc & 0x3f);
        }
        static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += len;
    }
    return true;
}

// The text of a scalar, which must be valid UTF-8: every string ends up in JSON.
const std::string& scalar_text(const YAML::Node& n) {
    const std::string& s = n.Scalar();
    if (!valid_utf8(s)) yaml_fail(n, "not valid UTF-8 (a YAML file is Unicode text)");
    return s;
}

bool all_of(const std::string& s, size_t from, bool (*pred)(char)) {
    if (from >= s.size()) return false;
    for (size_t i = from; i < s.size(); ++i) {
        if (!pred(s[i])) return false;
    }
    return true;
}

bool is_dec(char c) {
    return c >= '0' && c <= '9';
}
bool is_oct(char c) {
    return c >= '0' && c <= '7';
}
bool is_hex(char c) {
    return is_dec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// An integer in the core schema's forms, or nothing. Values past 64 bits become doubles.
std::optional<json> core_int(const std::string& s) {
    size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    int base = 0;
    size_t digits = 0;
    if (all_of(s, sign, is_dec)) {
        base = 10;
        digits = sign;
    } else if (sign == 0 && s.size() > 2 && s[0] == '0' && s[1] == 'o' && all_of(s, 2, is_oct)) {
        base = 8;
        digits = 2;
    } else if (sign == 0 && s.size() > 2 && s[0] == '0' && s[1] == 'x' && all_of(s, 2, is_hex)) {
        base = 16;
        digits = 2;
    } else {
        return std::nullopt;
    }
    const std::string body = s.substr(digits);
    errno = 0;
    if (sign && s[0] == '-') {
        long long v = std::strtoll(("-" + body).c_str(), nullptr, base);
        if (errno != ERANGE) return json(static_cast<int64_t>(v));
    } else {
        unsigned long long v = std::strtoull(body.c_str(), nullptr, base);
        if (errno != ERANGE) {
            if (v <= static_cast<unsigned long long>(INT64_MAX)) return json(static_cast<int64_t>(v));
            return json(static_cast<uint64_t>(v));
        }
    }
    return json(std::strtod(s.c_str(), nullptr));
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, .inf, .nan in their three spellings.
std::optional<json> core_float(const std::string& s) {
    size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    const std::string rest = s.substr(i);
    if (rest == ".inf" || rest == ".Inf" || rest == ".INF") {
        return json(s[0] == '-' ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
    }
    if (i == 0 && (s == ".nan" || s == ".NaN" || s == ".NAN")) return json(std::numeric_limits<double>::quiet_NaN());
    size_t int_digits = 0;
    while (i < s.size() && is_dec(s[i]))
        ++i, ++int_digits;
    size_t frac_digits = 0;
    bool dot = false;
    if (i < s.size() && s[i] == '.') {
        dot = true;
        ++i;
        while (i < s.size() && is_dec(s[i]))
            ++i, ++frac_digits;
    }
    if (int_digits == 0 && frac_digits == 0) return std::nullopt;
    if (int_digits == 0 && !dot) return std::nullopt;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
        size_t exp_digits = 0;
        while (i < s.size() && is_dec(s[i]))
            ++i, ++exp_digits;
        if (exp_digits == 0) return std::nullopt;
    }
    if (i != s.size()) return std::nullopt;
    return json(std::strtod(s.c_str(), nullptr));
}

std::optional<json> core_bool(const std::string& s) {
    if (s == "true" || s == "True" || s == "TRUE") return json(true);
    if (s == "false" || s == "False" || s == "FALSE") return json(false);
    return std::nullopt;
}

bool core_null(const std::string& s) {
    return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

json scalar_to_json(const YAML::Node& n) {
    const std::string& tag = n.Tag();
    const std::string& s = scalar_text(n);
    static const std::string core = "tag:yaml.org,2002:";
    if (tag == "?") {  // plain scalar: resolve by content
        if (core_null(s)) return nullptr;
        if (auto b = core_bool(s)) return *b;
        if (auto i = core_int(s)) return *i;
        if (auto f = core_float(s)) return *f;
        return s;
    }
    if (tag == core + "null") {
        if (!core_null(s)) yaml_fail(n, "!!null scalar " + json(s).dump() + " is not null");
        return nullptr;
    }
    if (tag == core + "bool") {
        if (auto b = core_bool(s)) return *b;
        yaml_fail(n, "!!bool scalar " + json(s).dump() + " is not true or false");
    }
    if (tag == core + "int") {
        if (auto i = core_int(s)) return *i;
        yaml_fail(n, "!!int scalar " + json(s).dump() + " is not an integer");
    }
    if (tag == core + "float") {
        if (auto f = core_float(s)) return *f;
        if (auto i = core_int(s)) return json(i->get<double>());
        yaml_fail(n, "!!float scalar " + json(s).dump() + " is not a number");
    }
    // "!" (quoted or block scalar), !!str, and any other tag: the text as written.
    return s;
}

json node_to_json(const YAML::Node& n, int depth) {
    if (depth > 128) yaml_fail(n, "nested too deeply");
    switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
        return nullptr;
    case YAML::NodeType::Scalar:
        return scalar_to_json(n);
    case YAML::NodeType::Sequence: {
        json a = json::array();
        for (const auto& c : n)
            a.push_back(node_to_json(c, depth + 1));
        return a;
    }
    case YAML::NodeType::Map: {
        json o = json::object();
        for (const auto& kv : n) {
            const YAML::Node& k = kv.first;
            std::string key;
            if (k.IsScalar())
                key = scalar_text(k);
            else if (k.IsNull())
                key = "null";
            else
                yaml_fail(k, "a mapping key must be a scalar");
            if (o.contains(key)) yaml_fail(k, "duplicate key " + json(key).dump());
            o[key] = node_to_json(kv.second, depth + 1);
        }
        return o;
    }
    }
    return nullptr;
}

// ---- files ----

bool has_suffix(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool wanted(const std::string& name) {
    if (name.empty() || name[0] == '.' || has_suffix(name, "~") || has_suffix(name, ".swp")) return false;
    return has_suffix(name, ".yaml") || has_suffix(name, ".yml") || has_suffix(name, ".json");
}

bool blank(const std::string& text) {
    return text.find_first_not_of(" \t\r\n") == std::string::npos;
}

std::string describe_object(const json& j) {
    std::string s;
    auto str = [&](const char* k) -> std::string {
        auto it = j.find(k);
        return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
    };
    std::string api = str("apiVersion"), kind = str("kind");
    s = api.empty() ? kind : api + " " + kind;
    if (auto m = j.find("metadata"); m != j.end() && m->is_object()) {
        std::string ns, name;
        if (auto it = m->find("namespace"); it != m->end() && it->is_string()) ns = it->get<std::string>();
        if (auto it = m->find("name"); it != m->end() && it->is_string()) name = it->get<std::string>();
        if (!name.empty()) s += " " + (ns.empty() ? name : ns + "/" + name);
    }
    return s;
}

// Collects the objects of one document (or JSON file), expanding lists.
struct DocReader {
    std::string prefix;  // "<file>: " or "<file>: document N: "
    std::vector<model::Object>& objects;
    std::vector<std::string>& fatal;                        // the file keeps its last good objects
    std::vector<std::string>& notes;                        // reported, but the file is still used
    std::vector<model::EgressQoS>* egress_qoses = nullptr;  // EgressQoS, which is no model::Object

    void read(const json& j, const std::string& path) {
        if (!j.is_object()) {
            fatal.push_back(prefix + path + ": expected a Kubernetes object (a mapping with apiVersion and kind)");
            return;
        }
        auto kind_it = j.find("kind");
        auto api_it = j.find("apiVersion");
        const bool named = kind_it != j.end() && kind_it->is_string() && api_it != j.end() && api_it->is_string();
        if (named) {
            const std::string kind = kind_it->get<std::string>();
            if (has_suffix(kind, "List") && (kind == "List" || j.contains("items"))) {
                read_list(j, path, kind, api_it->get<std::string>());
                return;
            }
            if (kind == "EgressQoS" && egress_qoses && api_it->get<std::string>() == "k8s.ovn.org/v1") {
                read_egress_qos(j, path);
                return;
            }
            if (!model::is_supported_kind(api_it->get<std::string>(), kind)) {
                notes.push_back(prefix + path + ": skipping " + describe_object(j) +
                                ": egw reads only v1 Service, v1 Node, discovery.k8s.io/v1 EndpointSlice, "
                                "k8s.ovn.org/v1 EgressService and coordination.k8s.io/v1 Lease");
                return;
            }
        }
        try {
            model::Object o = model::parse_object(j, path);
            model::Kind k = model::kind_of(o);
            model::ObjectMeta& meta = model::meta_of(o);
            if (model::is_namespaced(k) && meta.namespace_.empty()) meta.namespace_ = "default";
            objects.push_back(std::move(o));
        } catch (const model::ObjectError& e) {
            fatal.push_back(prefix + e.what());
        }
    }

    void read_egress_qos(const json& j, const std::string& path) {
        try {
            model::EgressQoS q = model::parse_egress_qos(j, path);
            if (q.meta.namespace_.empty()) q.meta.namespace_ = "default";
            egress_qoses->push_back(std::move(q));
        } catch (const model::ObjectError& e) {
            fatal.push_back(prefix + e.what());
        }
    }

    // `kind: List` (items carry their own apiVersion and kind) or a typed list such as
    // ServiceList, whose items may leave them out as the API server does.
    void read_list(const json& j, const std::string& path, const std::string& kind, const std::string& api) {
        auto found = j.find("items");
        if (found == j.end() || found->is_null()) return;
        const json& items = *found;
        if (!items.is_array()) {
            fatal.push_back(prefix + path + ".items: expected an array");
            return;
        }
        const std::string item_kind = kind == "List" ? "" : kind.substr(0, kind.size() - 4);
        for (size_t i = 0; i < items.size(); ++i) {
            const std::string ipath = path + ".items[" + std::to_string(i) + "]";
            if (!item_kind.empty() && items[i].is_object() &&
                (!items[i].contains("kind") || !items[i].contains("apiVersion"))) {
                json item = items[i];
                if (!item.contains("kind")) item["kind"] = item_kind;
                if (!item.contains("apiVersion")) item["apiVersion"] = api;
                read(item, ipath);
            } else {
                read(items[i], ipath);
            }
        }
    }
};

// yaml-cpp 0.7 (Debian 12) loops forever in LoadAll, allocating a null document per turn, when a
// document starts with a token that cannot start a node, such as a ',' at the top level: the
// parser reports a null there without consuming the token (jbeder/yaml-cpp#1040; fixed upstream
// after 0.8). Found by the manifest fuzzer. A first pass over the events sees it: two documents
// in a row that are a lone null at the same place.
class ProgressCheck : public YAML::EventHandler {
public:
    YAML::Mark first;  // of the document's first event
    unsigned events = 0;
    bool lone_null = false;

    void OnDocumentStart(const YAML::Mark&) override {
        events = 0;
        lone_null = false;
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& m, YAML::anchor_t) override { note(m, true); }
    void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { note(m, false); }
    void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override {
        note(m, false);
    }
    void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
        note(m, false);
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
        note(m, false);
    }
    void OnMapEnd() override {}

private:
    void note(const YAML::Mark& m, bool null) {
        if (events++ == 0) first = m;
        lone_null = events == 1 && null;
    }
};

void check_progress(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    ProgressCheck doc;
    bool previous_lone_null = false;
    YAML::Mark previous;
    while (parser.HandleNextDocument(doc)) {
        const bool stuck = doc.lone_null && previous_lone_null && doc.first.pos == previous.pos;
        if (stuck) throw YAML::ParserException(previous, "unexpected character where a document should start");
        previous_lone_null = doc.lone_null;
        previous = doc.first;
    }
}

}  // namespace

std::vector<json> parse_yaml(const std::string& text) {
    std::vector<YAML::Node> docs;
    try {
        check_progress(text);
        docs = YAML::LoadAll(text);
    } catch (const YAML::Exception& e) {
        throw std::runtime_error(at(e.mark) + e.msg);
    }
    std::vector<json> out;
    out.reserve(docs.size());
    for (const auto& d : docs)
        out.push_back(node_to_json(d, 0));
    return out;
}

ManifestDir::ManifestDir(std::string dir) : dir_(std::move(dir)) {}

void ManifestDir::read_file(const std::string& name, FileState& st, std::vector<std::string>& errors) {
    const std::string path = (fs::path(dir_) / name).string();
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    if (in) buf << in.rdbuf();
    if (!in || in.bad()) {
        st.ok = false;
        errors.push_back(name + ": cannot read: " + std::strerror(errno));
        return;
    }
    const std::string text = buf.str();

    std::vector<model::Object> objects;
    std::vector<model::EgressQoS> egress_qoses;
    std::vector<std::string> fatal;
    std::vector<std::string> notes;
    if (has_suffix(name, ".json")) {
        if (!blank(text)) {
            try {
                json j = json::parse(text);
                DocReader{name + ": ", objects, fatal, notes, &egress_qoses}.read(j, "$");
            } catch (const json::exception& e) {
                // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ...",
                // or out_of_range.406 for a number no double holds (1e400).
                std::string msg = e.what();
                if (auto p = msg.find("line "); p != std::string::npos)
                    msg = msg.substr(p);
                else if (auto q = msg.find("] "); q != std::string::npos)
                    msg = msg.substr(q + 2);
                fatal.push_back(name + ": " + msg);
            }
        }
    } else {
        try {
            std::vector<json> docs = parse_yaml(text);
            for (size_t i = 0; i < docs.size(); ++i) {
                if (docs[i].is_null()) continue;
                DocReader{name + ": document " + std::to_string(i + 1) + ": ", objects, fatal, notes, &egress_qoses}
                    .read(docs[i], "$");
            }
        } catch (const std::runtime_error& e) {
            fatal.push_back(name + ": " + e.what());
        }
    }

    errors.insert(errors.end(), fatal.begin(), fatal.end());
    errors.insert(errors.end(), notes.begin(), notes.end());
    st.ok = fatal.empty();
    if (st.ok) {
        st.objects = std::move(objects);
        st.egress_qoses = std::move(egress_qoses);
    } else if (!st.objects.empty()) {
        errors.push_back(name + ": keeping the " + std::to_string(st.objects.size()) +
                         " object(s) it last gave until it is fixed");
    }
}

bool ManifestDir::merge() {
    model::ObjectSet next;
    duplicate_errors_.clear();
    std::map<std::pair<model::Kind, std::string>, std::string> origin;  // object -> file that gave it
    for (const auto& [name, st] : files_) {
        for (const auto& o : st.objects) {
            const model::Kind k = model::kind_of(o);
            const std::string key = model::key_of(o);
            auto [it, fresh] = origin.emplace(std::make_pair(k, key), name);
            if (!fresh) {
                const std::string what = std::string(model::to_string(k)) + " " + key;
                if (it->second == name) {
                    duplicate_errors_.push_back(name + ": " + what + ": defined more than once; the first one is used");
                } else {
                    duplicate_errors_.push_back(name + ": " + what + ": also defined in " + it->second +
                                                ", which is used");
                }
                continue;
            }
            next.upsert(o);
        }
    }
    std::map<std::string, model::EgressQoS> next_qos;
    std::map<std::string, std::string> qos_origin;
    for (const auto& [name, st] : files_) {
        for (const model::EgressQoS& q : st.egress_qoses) {
            const std::string key = model::key_of(q.meta);
            auto [it, fresh] = qos_origin.emplace(key, name);
            if (!fresh) {
                duplicate_errors_.push_back(name + ": EgressQoS " + key +
                                            (it->second == name
                                                 ? ": defined more than once; the first one is used"
                                                 : ": also defined in " + it->second + ", which is used"));
                continue;
            }
            next_qos.emplace(key, q);
        }
    }
    const bool changed = !(next == merged_) || !(next_qos == merged_qos_);
    merged_ = std::move(next);
    merged_qos_ = std::move(next_qos);
    return changed;
}

ManifestDir::ScanResult ManifestDir::scan() {
    ScanResult r;
    std::vector<std::string> standing;  // problems that hold while a state lasts, reported once
    bool touched = false;

    std::error_code ec;
    const bool is_dir = fs::is_directory(dir_, ec);
    if (!is_dir) {
        standing.push_back(dir_ + ": manifest directory " +
                           (ec ? ec.message() : std::string("does not exist or is not a directory")));
        if (!files_.empty()) {
            files_.clear();
            touched = true;
        }
    } else {
        std::map<std::string, FileVersion> present;
        fs::directory_iterator it(dir_, ec), end;
        for (; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (!wanted(name)) continue;
            struct stat sb {};
            if (::stat(it->path().c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
            FileVersion v;
            v.mtime_ns = static_cast<int64_t>(sb.st_mtim.tv_sec) * 1000000000 + sb.st_mtim.tv_nsec;
            v.size = static_cast<int64_t>(sb.st_size);
            v.inode = static_cast<uint64_t>(sb.st_ino);
            present.emplace(name, v);
        }
        if (ec) {
            // A listing that failed half way tells nothing about deletions: keep what we have.
            standing.push_back(dir_ + ": cannot list the manifest directory: " + ec.message());
        } else {
            for (auto f = files_.begin(); f != files_.end();) {
                if (present.count(f->first)) {
                    ++f;
                } else {
                    f = files_.erase(f);
                    touched = true;
                }
            }
        }
        for (const auto& [name, v] : present) {
            auto [f, fresh] = files_.try_emplace(name);
            if (!fresh && f->second.version == v) continue;
            f->second.version = v;
            read_file(name, f->second, r.errors);
            touched = true;
        }
    }

    if (touched) r.changed = merge();
    standing.insert(standing.end(), duplicate_errors_.begin(), duplicate_errors_.end());

    std::set<std::string> now;
    for (const auto& e : standing) {
        if (now.insert(e).second && !reported_.count(e)) r.errors.push_back(e);
    }
    reported_ = std::move(now);
    return r;
}

}  // namespace egw::manifests
