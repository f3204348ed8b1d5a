// SPDX-License-Identifier: Apache-2.0
#include "control/cli/cli.h"

#include <set>

#include "config/config.h"
#include "control/cli/handlers.h"
#include "control/policy/policy_builder.h"
#include "control/runtime/runtime.h"
#include "control/status/status_file.h"

namespace egw::cli {

Reply ok(std::string text, nlohmann::json json) {
    Reply r;
    r.text = std::move(text);
    r.json = std::move(json);
    return r;
}

Reply fail(std::string text) {
    Reply r;
    r.ok = false;
    r.text = std::move(text);
    return r;
}

std::string or_dash(const std::string& s) {
    return s.empty() ? "-" : s;
}

std::string jstr(const nlohmann::json& j) {
    return j.is_string() ? j.get<std::string>() : "";
}

std::string jnum(const nlohmann::json& j) {
    if (j.is_number_unsigned()) return std::to_string(j.get<uint64_t>());
    if (j.is_number_integer()) return std::to_string(j.get<int64_t>());
    return j.is_number() ? j.dump() : "-";
}

const nlohmann::json& Context::status() {
    if (!status_) {
        control::StatusInputs in{host.runtime, host.policy, host.neighbors, true};
        in.max_sessions = 0;  // sessions are listed page by page (worker_requests.h)
        status_ = control::collect_status(in);
    }
    return *status_;
}

const control::PortInfo* Context::find_port(std::string_view name_or_id) const {
    for (const auto& p : host.runtime.ports())
        if (p.name == name_or_id || std::to_string(p.id) == name_or_id) return &p;
    return nullptr;
}

std::vector<std::string> HostNames::names(NameSet set) const {
    std::vector<std::string> out;
    switch (set) {
    case NameSet::ports:
        for (const auto& p : host_.runtime.ports()) {
            out.push_back(std::to_string(p.id));
            out.push_back(p.name);
        }
        break;
    case NameSet::services:
        for (const auto& v : host_.policy.views())
            out.push_back(v.state.key);
        break;
    case NameSet::namespaces: {
        std::set<std::string> seen;
        for (const auto& v : host_.policy.views())
            seen.insert(v.state.key.substr(0, v.state.key.find('/')));
        out.assign(seen.begin(), seen.end());
        break;
    }
    case NameSet::vrfs:
        for (const auto& v : host_.config.vrfs) {
            out.push_back(v.name);
            out.push_back(std::to_string(v.table));
        }
        break;
    case NameSet::sections:
    case NameSet::none:
        break;
    }
    return out;
}

Cli::Outcome Cli::run(std::string_view line, Origin origin) {
    const Grammar& g = egw_grammar();
    // "?" at the end, as in vppctl and grcli: what may come next ("show ?", "sh?", "?").
    std::string_view trimmed = line.substr(0, line.find_last_not_of(" \t") + 1);
    if (!trimmed.empty() && trimmed.back() == '?') {
        Completion c = g.complete(trimmed.substr(0, trimmed.size() - 1), names_);
        std::string text;
        for (const auto& w : c.candidates)
            text += "  " + w + "\n";
        for (const auto& h : c.hints)
            text += "  " + h + "\n";
        if (text.empty()) text = "  (nothing: the command is complete, or the words before ? are wrong)\n";
        return {Status::ok, text};
    }
    ParseResult p = g.parse(line, names_);
    if (p.blank) return {};
    if (!p.command) return {Status::error, p.error + "\n"};
    Context ctx(host_, origin, g);
    Reply r;
    try {
        r = p.command->handler(ctx, p.args);
    } catch (const std::exception& e) {
        return {Status::error,
                std::string(p.command->pattern.substr(0, p.command->pattern.find(' '))) + ": " + e.what() + "\n"};
    }
    Outcome out;
    out.status = !r.ok ? Status::error : r.quit ? Status::bye : Status::ok;
    if (p.json && r.ok) {
        const nlohmann::json& j = r.json.is_null() ? nlohmann::json{{"message", r.text}} : r.json;
        out.text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    } else {
        out.text = std::move(r.text);
        if (!out.text.empty() && out.text.back() != '\n') out.text += '\n';
    }
    return out;
}

Completion Cli::complete(std::string_view before_cursor) const {
    return egw_grammar().complete(before_cursor, names_);
}

}  // namespace egw::cli
