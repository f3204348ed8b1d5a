// SPDX-License-Identifier: Apache-2.0
//
// How an object parser's error quotes the value it refused: containers by their type, scalars
// as JSON, a string over 64 bytes cut to 61 and "..." at a UTF-8 character boundary (a cut in
// the middle of a character would make the dump throw), invalid UTF-8 replaced, never thrown.
// The Kubernetes kinds' parsers (control/model, control/dns) share it; the configuration loader
// words its own ("an empty object").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace egw::json_text {

inline std::string quote_refused(const nlohmann::json& v) {
    using nlohmann::json;
    if (v.is_object()) return "an object";
    if (v.is_array()) return "an array";
    if (v.is_string() && v.get_ref<const std::string&>().size() > 64) {
        const std::string& s = v.get_ref<const std::string&>();
        size_t cut = 61;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80)
            --cut;
        return json(s.substr(0, cut) + "...").dump(-1, ' ', true, json::error_handler_t::replace);
    }
    return v.dump(-1, ' ', true, json::error_handler_t::replace);
}

}  // namespace egw::json_text
