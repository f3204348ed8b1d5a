// SPDX-License-Identifier: Apache-2.0
//
// The egwctl <-> egwd protocol (control/cli/protocol.h): response framing, completion bodies,
// socket paths, and a client against a socket served here.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "control/cli/protocol.h"

using namespace egw::cli;

namespace {

TEST(Protocol, ResponsesRoundTrip) {
    std::string wire = encode_response(Status::ok, "PORT\n0\n") + encode_response(Status::error, "bad\n") +
                       encode_response(Status::bye, "");
    EXPECT_EQ(wire.substr(0, 5), "ok 7\n");
    Response r;
    ASSERT_TRUE(decode_response(wire, r));
    EXPECT_EQ(r.status, Status::ok);
    EXPECT_EQ(r.body, "PORT\n0\n");
    ASSERT_TRUE(decode_response(wire, r));
    EXPECT_EQ(r.status, Status::error);
    EXPECT_EQ(r.body, "bad\n");
    ASSERT_TRUE(decode_response(wire, r));
    EXPECT_EQ(r.status, Status::bye);
    EXPECT_EQ(r.body, "");
    EXPECT_TRUE(wire.empty());
}

TEST(Protocol, PartialResponsesWait) {
    std::string full = encode_response(Status::ok, std::string(1000, 'x'));
    std::string buf;
    Response r;
    for (size_t i = 0; i < full.size(); ++i) {
        EXPECT_FALSE(decode_response(buf, r)) << i;
        buf += full[i];
    }
    ASSERT_TRUE(decode_response(buf, r));
    EXPECT_EQ(r.body.size(), 1000u);
}

TEST(Protocol, MalformedHeadersThrow) {
    for (std::string bad : std::vector<std::string>{"maybe 3\nabc", "ok\n", "ok x\n", "ok -1\n", "ok 99999999999999\n",
                                                    std::string(100, 'o')}) {
        Response r;
        EXPECT_THROW(decode_response(bad, r), ProtocolError) << bad;
    }
}

TEST(Protocol, CompletionBodies) {
    Completion c;
    c.candidates = {"default/db", "default/web"};
    c.hints = {"SERVICE: an EgressService as namespace/name"};
    std::string body = encode_completion(c);
    EXPECT_EQ(body, "c default/db\nc default/web\nh SERVICE: an EgressService as namespace/name\n");
    Completion back = decode_completion(body, "show service def");
    EXPECT_EQ(back.partial, "def");
    EXPECT_EQ(back.candidates, c.candidates);
    EXPECT_EQ(back.hints, c.hints);
    EXPECT_TRUE(decode_completion("", "show ").candidates.empty());
    EXPECT_EQ(decode_completion("", "show ").partial, "");
    EXPECT_EQ(decode_completion("junk\nc ok", "").candidates, (std::vector<std::string>{"ok"}));
}

TEST(Protocol, PartialWord) {
    EXPECT_EQ(partial_word(""), "");
    EXPECT_EQ(partial_word("sh"), "sh");
    EXPECT_EQ(partial_word("show "), "");
    EXPECT_EQ(partial_word("show port\tst"), "st");
}

TEST(Protocol, SocketPathFollowsDpdkRuntimeDir) {
    if (getuid() == 0) {
        EXPECT_EQ(socket_path_for("egw"), "/var/run/dpdk/egw/egw.sock");
        EXPECT_EQ(runtime_dir_for("egw-demo"), "/var/run/dpdk/egw-demo");
    } else {
        const char* xdg = std::getenv("XDG_RUNTIME_DIR");
        EXPECT_EQ(runtime_dir_for("p"), std::string(xdg ? xdg : "/tmp") + "/dpdk/p");
    }
}

TEST(Protocol, ClientTalksToASocket) {
    std::string path = (std::filesystem::temp_directory_path() / ("egw-proto-" + std::to_string(getpid()))).string();
    int srv = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(srv, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    ASSERT_EQ(bind(srv, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(listen(srv, 1), 0);
    std::string seen;
    std::thread server([&] {
        int c = accept(srv, nullptr, nullptr);
        auto read_line = [&] {
            std::string l;
            char ch;
            while (read(c, &ch, 1) == 1 && ch != '\n')
                l += ch;
            return l;
        };
        seen += read_line() + "|";
        std::string ok = encode_response(Status::ok, "hello\n");
        (void)!write(c, ok.data(), 3);  // split, to exercise reassembly
        usleep(10000);
        (void)!write(c, ok.data() + 3, ok.size() - 3);
        seen += read_line() + "|";
        std::string no = encode_response(Status::error, "no\n");
        (void)!write(c, no.data(), no.size());
        close(c);
    });
    {
        Client client(path);
        Response r = client.request("run", "show drops");
        EXPECT_EQ(r.status, Status::ok);
        EXPECT_EQ(r.body, "hello\n");
        r = client.request("complete", "show\r\nx");  // line breaks never reach the wire
        EXPECT_EQ(r.status, Status::error);
        EXPECT_THROW(client.request("run", "again"), std::runtime_error);  // the server closed
    }
    server.join();
    EXPECT_EQ(seen, "run show drops|complete showx|");
    close(srv);
    unlink(path.c_str());
    EXPECT_THROW(Client{path}, std::runtime_error);
}

}  // namespace
