// SPDX-License-Identifier: Apache-2.0
//
// The handlers of the command table (commands.cpp), one file per section (cmd_*.cpp). A handler
// runs on egwd's control thread, fills Reply::text (tables with upper-case headers) and, for
// show commands, Reply::json with the same data, and reports bad input with fail() naming the
// offending value. show handlers change nothing.
#pragma once

#include "control/cli/cli.h"

namespace egw::cli {

// ports
Reply show_port_stats(Context& ctx, const Args& a);
Reply show_port_xstats(Context& ctx, const Args& a);
Reply clear_port_stats(Context& ctx, const Args& a);
Reply show_port_info(Context& ctx, const Args& a);
Reply clear_counters(Context& ctx, const Args& a);
Reply show_steering(Context& ctx, const Args& a);
Reply show_vlans(Context& ctx, const Args& a);

// services
Reply show_services(Context& ctx, const Args& a);
Reply show_service(Context& ctx, const Args& a);
Reply show_egressqos(Context& ctx, const Args& a);

// sessions
Reply show_sessions(Context& ctx, const Args& a);
Reply show_snat_pools(Context& ctx, const Args& a);
Reply clear_sessions_service(Context& ctx, const Args& a);
Reply clear_sessions_all(Context& ctx, const Args& a);

// routing
Reply show_vrfs(Context& ctx, const Args& a);
Reply show_routes(Context& ctx, const Args& a);
Reply show_neighbors(Context& ctx, const Args& a);
Reply show_arp(Context& ctx, const Args& a);

// trace
Reply trace_start(Context& ctx, const Args& a);
Reply trace_stop(Context& ctx, const Args& a);
Reply show_trace(Context& ctx, const Args& a);

// system
Reply show_lcores(Context& ctx, const Args& a);
Reply show_k8s(Context& ctx, const Args& a);
Reply show_egressips(Context& ctx, const Args& a);
Reply show_sync(Context& ctx, const Args& a);
Reply show_egressfirewall(Context& ctx, const Args& a);
Reply show_drops(Context& ctx, const Args& a);
Reply show_icmp(Context& ctx, const Args& a);
Reply show_config(Context& ctx, const Args& a);
Reply show_version(Context& ctx, const Args& a);
Reply set_log_level(Context& ctx, const Args& a);
Reply reload_config(Context& ctx, const Args& a);
Reply help(Context& ctx, const Args& a);
Reply quit(Context& ctx, const Args& a);

// Shared by handlers.
std::string or_dash(const std::string& s);  // "-" for an empty cell
std::string jnum(const nlohmann::json& j);  // a JSON number as a cell, "-" when absent
std::string jstr(const nlohmann::json& j);  // a JSON string, "" when absent

}  // namespace egw::cli
