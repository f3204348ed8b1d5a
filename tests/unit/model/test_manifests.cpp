// SPDX-License-Identifier: Apache-2.0
//
// The `files` state source (control/manifests/manifest_dir.h).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "control/manifests/manifest_dir.h"
#include "control/model/rules.h"

namespace fs = std::filesystem;
using egw::manifests::ManifestDir;
using egw::manifests::parse_yaml;
using nlohmann::json;

namespace {

const char* kWebYaml = R"(# the web Service, its endpoints and its EgressService
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: LoadBalancer
status:
  loadBalancer:
    ingress:
    - ip: 192.0.2.50
---
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc12
  namespace: default
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
endpoints:
- addresses: ["10.244.1.10"]
  nodeName: worker-1
---
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata:
  name: web
  namespace: default
spec:
  sourceIPBy: LoadBalancerIP
  nodeSelector:
    matchLabels:
      egw.example.com/gateway: "true"
)";

std::string egress_yaml(const std::string& name, const std::string& by = "LoadBalancerIP") {
    return "apiVersion: k8s.ovn.org/v1\nkind: EgressService\nmetadata:\n  name: " + name +
           "\n  namespace: default\nspec:\n  sourceIPBy: " + by + "\n";
}

class ManifestTest : public ::testing::Test {
protected:
    fs::path dir;
    int generation = 0;

    void SetUp() override {
        std::string tmpl = (fs::temp_directory_path() / "egw-manifests-XXXXXX").string();
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
        dir = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }

    // Writes a file and gives it a fresh mtime, so a rewrite is seen even within one clock tick.
    void write(const std::string& name, const std::string& text) {
        {
            std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
            out << text;
        }
        auto t = fs::file_time_type::clock::now() + std::chrono::seconds(++generation);
        fs::last_write_time(dir / name, t);
    }
    void remove(const std::string& name) { fs::remove(dir / name); }
};

std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& e : v)
        s += e + "\n";
    return s;
}

}  // namespace

TEST(ParseYaml, ScalarsFollowTheCoreSchema) {
    auto docs = parse_yaml(R"(
quoted_true: "true"
plain_true: true
plain_False: False
single: 'yes'
plain_yes: yes
int: 15
negative: -3
hex: 0x1f
octal: 0o17
float: 1.5
exp: 1e3
null_word: null
tilde: ~
empty:
quoted_null: "null"
tagged_str: !!str 100
tagged_int: !!int "7"
block: |
  line
version: 1.2.3
ip: 192.0.2.1
list: [a, 1, false]
)");
    ASSERT_EQ(docs.size(), 1u);
    const json& d = docs[0];
    EXPECT_EQ(d["quoted_true"], json("true"));
    EXPECT_EQ(d["plain_true"], json(true));
    EXPECT_EQ(d["plain_False"], json(false));
    EXPECT_EQ(d["single"], json("yes"));
    EXPECT_EQ(d["plain_yes"], json("yes"));  // YAML 1.2: not a boolean
    EXPECT_TRUE(d["int"].is_number_integer());
    EXPECT_EQ(d["int"], json(15));
    EXPECT_EQ(d["negative"], json(-3));
    EXPECT_EQ(d["hex"], json(31));
    EXPECT_EQ(d["octal"], json(15));
    EXPECT_TRUE(d["float"].is_number_float());
    EXPECT_EQ(d["float"], json(1.5));
    EXPECT_EQ(d["exp"], json(1000.0));
    EXPECT_TRUE(d["null_word"].is_null());
    EXPECT_TRUE(d["tilde"].is_null());
    EXPECT_TRUE(d["empty"].is_null());
    EXPECT_EQ(d["quoted_null"], json("null"));
    EXPECT_EQ(d["tagged_str"], json("100"));
    EXPECT_EQ(d["tagged_int"], json(7));
    EXPECT_EQ(d["block"], json("line\n"));
    EXPECT_EQ(d["version"], json("1.2.3"));
    EXPECT_EQ(d["ip"], json("192.0.2.1"));
    EXPECT_EQ(d["list"], json::parse(R"(["a", 1, false])"));
}

TEST(ParseYaml, DocumentsAndErrors) {
    auto docs = parse_yaml("a: 1\n---\n# nothing\n---\nb: 2\n");
    ASSERT_EQ(docs.size(), 3u);
    EXPECT_TRUE(docs[1].is_null());
    EXPECT_EQ(docs[2]["b"], json(2));

    try {
        parse_yaml("a: 1\na: 2\n");
        FAIL() << "duplicate key accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "line 2, column 1: duplicate key \"a\"");
    }
    try {
        parse_yaml("a: [1\nb: 2\n");
        FAIL() << "syntax error accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()).rfind("line 2, column ", 0), 0u) << e.what();
    }
}

TEST_F(ManifestTest, MissingDirectoryIsAnErrorOnce) {
    ManifestDir md((dir / "absent").string());
    auto r = md.scan();
    EXPECT_FALSE(r.changed);
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_NE(r.errors[0].find("absent: manifest directory"), std::string::npos) << r.errors[0];
    EXPECT_EQ(md.objects().size(), 0u);
    EXPECT_TRUE(md.scan().errors.empty());

    // It appears, gets a file, then vanishes: its objects go with it, and the error comes back.
    fs::create_directory(dir / "absent");
    { std::ofstream(dir / "absent" / "es.yaml") << egress_yaml("web"); }
    r = md.scan();
    EXPECT_TRUE(r.changed);
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    EXPECT_EQ(md.objects().egress_services.size(), 1u);
    fs::remove_all(dir / "absent");
    r = md.scan();
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(md.objects().size(), 0u);
}

TEST_F(ManifestTest, EmptyDirectory) {
    ManifestDir md(dir.string());
    auto r = md.scan();
    EXPECT_FALSE(r.changed);
    EXPECT_TRUE(r.errors.empty());
}

TEST_F(ManifestTest, MultiDocumentYaml) {
    write("web.yaml", kWebYaml);
    ManifestDir md(dir.string());
    auto r = md.scan();
    EXPECT_TRUE(r.changed);
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    const auto& o = md.objects();
    ASSERT_EQ(o.services.count("default/web"), 1u);  // no namespace written: "default"
    EXPECT_EQ(o.services.at("default/web").ingress.at(0).ip, "192.0.2.50");
    ASSERT_EQ(o.endpoint_slices.count("default/web-abc12"), 1u);
    EXPECT_EQ(o.endpoint_slices.at("default/web-abc12").service_name, "web");
    ASSERT_EQ(o.egress_services.count("default/web"), 1u);
    EXPECT_EQ(o.egress_services.at("default/web").node_selector.match_labels.at("egw.example.com/gateway"), "true");
    EXPECT_EQ(o.size(), 3u);

    r = md.scan();
    EXPECT_FALSE(r.changed);
    EXPECT_TRUE(r.errors.empty());
}

TEST_F(ManifestTest, ListInYamlAndJson) {
    write("list.yml", R"(apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: gw-1
    labels: {egw.example.com/gateway: "true"}
  status:
    conditions: [{type: Ready, status: "True"}]
- apiVersion: k8s.ovn.org/v1
  kind: EgressService
  metadata: {name: a, namespace: ns1}
)");
    write("db.json", R"({"apiVersion": "v1", "kind": "List", "items": [
      {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": "default"},
       "spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.60"}]}}},
      {"apiVersion": "k8s.ovn.org/v1", "kind": "EgressService", "metadata": {"name": "db"},
       "spec": {"sourceIPBy": "Network", "network": "blue"}}
    ]})");
    // A typed list as the API server returns it: items without apiVersion and kind.
    write("svcs.json", R"({"apiVersion": "v1", "kind": "ServiceList", "metadata": {"resourceVersion": "9"},
      "items": [{"metadata": {"name": "x", "namespace": "default"}, "spec": {"type": "ClusterIP"}}]})");
    write("empty-list.yaml", "apiVersion: v1\nkind: List\nitems: []\n");
    ManifestDir md(dir.string());
    auto r = md.scan();
    EXPECT_TRUE(r.changed);
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    const auto& o = md.objects();
    ASSERT_EQ(o.nodes.count("gw-1"), 1u);
    EXPECT_TRUE(o.nodes.at("gw-1").ready);
    EXPECT_EQ(o.egress_services.count("ns1/a"), 1u);
    EXPECT_EQ(o.services.at("default/db").ingress.at(0).ip, "192.0.2.60");
    EXPECT_EQ(o.egress_services.at("default/db").network, "blue");
    EXPECT_EQ(o.services.at("default/x").type, "ClusterIP");
    EXPECT_EQ(o.size(), 5u);
}

TEST_F(ManifestTest, AddChangeDelete) {
    ManifestDir md(dir.string());
    EXPECT_FALSE(md.scan().changed);

    write("a.yaml", egress_yaml("a"));
    auto r = md.scan();
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(md.objects().egress_services.at("default/a").source_ip_by, "LoadBalancerIP");

    write("b.yaml", egress_yaml("b"));
    EXPECT_TRUE(md.scan().changed);
    EXPECT_EQ(md.objects().egress_services.size(), 2u);

    write("a.yaml", egress_yaml("a", "Network"));
    EXPECT_TRUE(md.scan().changed);
    EXPECT_EQ(md.objects().egress_services.at("default/a").source_ip_by, "Network");

    // Rewritten with the same content: read again, but nothing changed.
    write("a.yaml", egress_yaml("a", "Network"));
    r = md.scan();
    EXPECT_FALSE(r.changed);
    EXPECT_TRUE(r.errors.empty());

    remove("b.yaml");
    EXPECT_TRUE(md.scan().changed);
    EXPECT_EQ(md.objects().egress_services.size(), 1u);
    EXPECT_EQ(md.objects().egress_services.count("default/b"), 0u);

    // Replaced by rename (a new inode), as editors and ConfigMap updates do.
    { std::ofstream(dir / ".a.yaml.tmp") << egress_yaml("a2"); }
    fs::rename(dir / ".a.yaml.tmp", dir / "a.yaml");
    EXPECT_TRUE(md.scan().changed);
    EXPECT_EQ(md.objects().egress_services.count("default/a2"), 1u);
    EXPECT_EQ(md.objects().egress_services.size(), 1u);

    remove("a.yaml");
    EXPECT_TRUE(md.scan().changed);
    EXPECT_EQ(md.objects().size(), 0u);
    EXPECT_FALSE(md.scan().changed);
}

TEST_F(ManifestTest, MalformedFileKeepsLastGoodObjects) {
    write("a.yaml", egress_yaml("a"));
    write("b.yaml", egress_yaml("b"));
    ManifestDir md(dir.string());
    ASSERT_TRUE(md.scan().changed);

    // YAML syntax error: b keeps its objects, a is untouched.
    write("b.yaml", "apiVersion: k8s.ovn.org/v1\nkind: [EgressService\n");
    auto r = md.scan();
    EXPECT_FALSE(r.changed);
    ASSERT_EQ(r.errors.size(), 2u) << joined(r.errors);
    EXPECT_EQ(r.errors[0].rfind("b.yaml: line ", 0), 0u) << r.errors[0];
    EXPECT_EQ(r.errors[1], "b.yaml: keeping the 1 object(s) it last gave until it is fixed");
    EXPECT_EQ(md.objects().egress_services.size(), 2u);
    EXPECT_TRUE(md.scan().errors.empty());  // reported once

    // A bad field in the second document: the whole file keeps its last good version.
    write("b.yaml", egress_yaml("b2") + "---\n" + egress_yaml("b3", "Foo"));
    r = md.scan();
    EXPECT_FALSE(r.changed);
    ASSERT_GE(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0],
              "b.yaml: document 2: $.spec.sourceIPBy: expected one of LoadBalancerIP, Network, got \"Foo\"");
    EXPECT_EQ(md.objects().egress_services.count("default/b"), 1u);
    EXPECT_EQ(md.objects().egress_services.count("default/b2"), 0u);
    EXPECT_TRUE(md.scan().errors.empty());

    // Other files stay in force and keep changing.
    write("a.yaml", egress_yaml("a", "Network"));
    r = md.scan();
    EXPECT_TRUE(r.changed);
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    EXPECT_EQ(md.objects().egress_services.at("default/a").source_ip_by, "Network");
    EXPECT_EQ(md.objects().egress_services.count("default/b"), 1u);

    // Fixed: its new objects replace the old ones.
    write("b.yaml", egress_yaml("b2") + "---\n" + egress_yaml("b3"));
    r = md.scan();
    EXPECT_TRUE(r.changed);
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    EXPECT_EQ(md.objects().egress_services.count("default/b"), 0u);
    EXPECT_EQ(md.objects().egress_services.count("default/b3"), 1u);
}

// Found by the manifest fuzzer: yaml-cpp 0.7's LoadAll never returned (and grew without bound) on
// a document that starts with ',', so one such file stalled the files source for good.
TEST(ParseYaml, CommaWhereADocumentStartsIsAnError) {
    for (const char* text : {",", "\"x\",", "{a: b},", "a: 1\n---\n,\n"}) {
        try {
            parse_yaml(text);
            FAIL() << "accepted " << text;
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find("unexpected character where a document should start"),
                      std::string::npos)
                << text << ": " << e.what();
        }
    }
    EXPECT_EQ(parse_yaml("---\n---\na: b, c\n").size(), 2u);  // empty documents and commas in scalars are fine
}

TEST_F(ManifestTest, FileThatNeverParsedGivesNothing) {
    write("bad.json", R"({"apiVersion": "v1", "kind": "Service", )");
    write("good.yaml", egress_yaml("g"));
    ManifestDir md(dir.string());
    auto r = md.scan();
    EXPECT_TRUE(r.changed);
    ASSERT_EQ(r.errors.size(), 1u) << joined(r.errors);
    EXPECT_EQ(r.errors[0].rfind("bad.json: line 1, column ", 0), 0u) << r.errors[0];
    EXPECT_EQ(md.objects().size(), 1u);

    write("bad.json", R"({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": 1}})");
    r = md.scan();
    ASSERT_EQ(r.errors.size(), 1u) << joined(r.errors);
    EXPECT_EQ(r.errors[0], "bad.json: $.spec.type: expected a string, got 1 (quote it in YAML)");
    EXPECT_FALSE(r.changed);
}

TEST_F(ManifestTest, NumberNoDoubleHoldsIsAnErrorNotACrash) {
    // A JSON number beyond a double's range makes the parser throw out_of_range, not parse_error.
    write("huge.json", R"({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "generation": 1e400}})");
    ManifestDir md(dir.string());
    ManifestDir::ScanResult r;
    ASSERT_NO_THROW(r = md.scan());
    ASSERT_EQ(r.errors.size(), 1u) << joined(r.errors);
    EXPECT_EQ(r.errors[0].rfind("huge.json: ", 0), 0u) << r.errors[0];
    EXPECT_NE(r.errors[0].find("1e400"), std::string::npos) << r.errors[0];
    EXPECT_EQ(md.objects().size(), 0u);
}

TEST_F(ManifestTest, UnquotedTrueLabelIsAnError) {
    write("node.yaml",
          "apiVersion: v1\nkind: Node\nmetadata:\n  name: gw-1\n  labels:\n    egw.example.com/gateway: true\n");
    ManifestDir md(dir.string());
    auto r = md.scan();
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0],
              "node.yaml: document 1: $.metadata.labels[\"egw.example.com/gateway\"]: expected a string, "
              "got true (quote it in YAML)");
    EXPECT_EQ(md.objects().size(), 0u);
}

// Found by the manifest fuzzer: a label key that was not UTF-8 made scan() throw (the JSON
// library refuses to write such a string, here while naming the field in an error).
TEST_F(ManifestTest, TextThatIsNotUtf8IsAnError) {
    write("node.yaml", "apiVersion: v1\nkind: Node\nmetadata:\n  name: gw-1\n  labels:\n    F\x9b: x\n");
    write("svc.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: \"\\uD800\"\n");
    ManifestDir md(dir.string());
    ManifestDir::ScanResult r;
    ASSERT_NO_THROW(r = md.scan());
    ASSERT_EQ(r.errors.size(), 2u) << joined(r.errors);
    EXPECT_EQ(r.errors[0], "node.yaml: line 6, column 5: not valid UTF-8 (a YAML file is Unicode text)");
    EXPECT_EQ(r.errors[1].rfind("svc.yaml: line 4, column ", 0), 0u) << r.errors[1];  // yaml-cpp refuses surrogates
    EXPECT_EQ(md.objects().size(), 0u);
    EXPECT_EQ(parse_yaml("a: \"h\u00e9 \\u2603 \\U0001F600\"\n")[0]["a"], json("h\u00e9 \u2603 \U0001F600"));
}

TEST_F(ManifestTest, UnsupportedKindsAreSkipped) {
    write("mixed.yaml", R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}
- apiVersion: k8s.ovn.org/v1
  kind: EgressService
  metadata: {name: web}
)");
    ManifestDir md(dir.string());
    auto r = md.scan();
    EXPECT_TRUE(r.changed);
    ASSERT_EQ(r.errors.size(), 2u) << joined(r.errors);
    EXPECT_EQ(r.errors[0].rfind("mixed.yaml: document 1: $: skipping apps/v1 Deployment default/web: ", 0), 0u)
        << r.errors[0];
    EXPECT_EQ(r.errors[1].rfind("mixed.yaml: document 2: $.items[0]: skipping v1 ConfigMap cm: ", 0), 0u)
        << r.errors[1];
    EXPECT_EQ(md.objects().size(), 1u);
    EXPECT_EQ(md.objects().egress_services.count("default/web"), 1u);
    EXPECT_TRUE(md.scan().errors.empty());
}

TEST_F(ManifestTest, SameObjectInTwoFilesFirstWins) {
    write("a.yaml", egress_yaml("web", "LoadBalancerIP"));
    write("b.yaml", egress_yaml("web", "Network"));
    ManifestDir md(dir.string());
    auto r = md.scan();
    ASSERT_EQ(r.errors.size(), 1u) << joined(r.errors);
    EXPECT_EQ(r.errors[0], "b.yaml: EgressService default/web: also defined in a.yaml, which is used");
    EXPECT_EQ(md.objects().egress_services.at("default/web").source_ip_by, "LoadBalancerIP");
    EXPECT_TRUE(md.scan().errors.empty());

    // Touching an unrelated file does not repeat it.
    write("c.yaml", egress_yaml("c"));
    r = md.scan();
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);

    // Gone from a.yaml: b.yaml's copy takes over, silently.
    remove("a.yaml");
    r = md.scan();
    EXPECT_TRUE(r.changed);
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    EXPECT_EQ(md.objects().egress_services.at("default/web").source_ip_by, "Network");
}

TEST_F(ManifestTest, SameObjectTwiceInOneFile) {
    write("a.yaml", egress_yaml("web", "LoadBalancerIP") + "---\n" + egress_yaml("web", "Network"));
    ManifestDir md(dir.string());
    auto r = md.scan();
    ASSERT_EQ(r.errors.size(), 1u) << joined(r.errors);
    EXPECT_EQ(r.errors[0], "a.yaml: EgressService default/web: defined more than once; the first one is used");
    EXPECT_EQ(md.objects().egress_services.at("default/web").source_ip_by, "LoadBalancerIP");
}

TEST_F(ManifestTest, IgnoredNames) {
    write(".hidden.yaml", egress_yaml("hidden"));
    write("backup.yaml~", egress_yaml("backup"));
    write(".web.yaml.swp", egress_yaml("swap"));
    write("web.swp", egress_yaml("swap2"));
    write("notes.txt", egress_yaml("notes"));
    fs::create_directory(dir / "sub.yaml");
    write("sub.yaml/inner.yaml", egress_yaml("inner"));
    write("real.yaml", egress_yaml("real"));
    ManifestDir md(dir.string());
    auto r = md.scan();
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    EXPECT_EQ(md.objects().size(), 1u);
    EXPECT_EQ(md.objects().egress_services.count("default/real"), 1u);
}

TEST_F(ManifestTest, SymlinkedFilesAreRead) {
    // A mounted ConfigMap: visible names are symlinks into a hidden directory.
    fs::create_directory(dir / "..data");
    write("..data/es.yaml", egress_yaml("linked"));
    fs::create_symlink(fs::path("..data") / "es.yaml", dir / "es.yaml");
    ManifestDir md(dir.string());
    EXPECT_TRUE(md.scan().changed);
    EXPECT_EQ(md.objects().egress_services.count("default/linked"), 1u);
}

TEST_F(ManifestTest, EmptyFilesAndDocuments) {
    write("empty.yaml", "");
    write("comments.yaml", "# nothing here\n---\n---\n");
    write("empty.json", "  \n");
    ManifestDir md(dir.string());
    auto r = md.scan();
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(md.objects().size(), 0u);
}

TEST_F(ManifestTest, NonObjectDocumentIsAnError) {
    write("list.yaml", "- a\n- b\n");
    ManifestDir md(dir.string());
    auto r = md.scan();
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0],
              "list.yaml: document 1: $: expected a Kubernetes object (a mapping with apiVersion and kind)");
}

// The demo's manifests parse cleanly and give the outcome config/demo-manifests/README.md describes.
TEST(DemoManifests, ParseAndEvaluate) {
    const char* root = std::getenv("EGW_SOURCE_ROOT");
    if (!root) GTEST_SKIP() << "EGW_SOURCE_ROOT not set";
    ManifestDir md((fs::path(root) / "config" / "demo-manifests").string());
    auto r = md.scan();
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    const auto& o = md.objects();
    EXPECT_EQ(o.egress_services.size(), 2u);
    EXPECT_EQ(o.services.size(), 2u);
    EXPECT_EQ(o.endpoint_slices.size(), 4u) << "one IPv4 and one IPv6 slice per Service: the demo is dual-stack";
    EXPECT_EQ(o.nodes.size(), 1u);

    egw::model::GatewayIdentity self{"gw-1", {{"egw.example.com/gateway", "true"}}};
    // config/demo.json's pod ranges.
    std::vector<egw::net::IpPrefix> pods{egw::net::IpPrefix::from_v4(10u << 24 | 244u << 16, 16),
                                         *egw::net::parse_prefix("fd00:10:244::/48")};
    auto states = egw::model::evaluate_single_gateway(o, self, pods);
    ASSERT_EQ(states.size(), 2u);

    const auto& db = states[0];
    EXPECT_EQ(db.key, "default/db");
    EXPECT_EQ(db.mode, egw::model::Mode::network);
    EXPECT_EQ(db.status_host, "ALL");
    EXPECT_TRUE(db.serve_here);
    EXPECT_EQ(db.network, "blue");
    EXPECT_EQ(db.endpoint_ipv4s, (std::vector<uint32_t>{10u << 24 | 244u << 16 | 1u << 8 | 20}));
    EXPECT_EQ(db.endpoint_ipv6s, (std::vector<egw::net::IpAddr>{*egw::net::parse_ip("fd00:10:244:1::20")}));

    const auto& web = states[1];
    EXPECT_EQ(web.key, "default/web");
    EXPECT_EQ(web.mode, egw::model::Mode::load_balancer_ip);
    EXPECT_EQ(web.status_host, "gw-1");
    EXPECT_TRUE(web.serve_here);
    EXPECT_EQ(web.ingress_ipv4, std::optional<uint32_t>(192u << 24 | 2u << 8 | 50));
    EXPECT_EQ(web.endpoint_ipv4s,
              (std::vector<uint32_t>{10u << 24 | 244u << 16 | 1u << 8 | 10, 10u << 24 | 244u << 16 | 1u << 8 | 11}));
    EXPECT_EQ(web.endpoint_nodes, (std::vector<std::string>{"worker-1"}));
    EXPECT_EQ(web.ingress_ipv6, egw::net::parse_ip("2001:db8:2::50"));
    EXPECT_EQ(web.endpoint_ipv6s, (std::vector<egw::net::IpAddr>{*egw::net::parse_ip("fd00:10:244:1::10"),
                                                                 *egw::net::parse_ip("fd00:10:244:1::11")}));
    EXPECT_EQ(web.ip_families, (std::vector<std::string>{"IPv4", "IPv6"}));
    EXPECT_EQ(web.ip_family_policy, "RequireDualStack");
}

// The files source reads EgressIP's kinds as the kubernetes source does: a Pod without a
// namespace is in "default", an EgressIP and a Namespace are cluster-scoped, and an EgressIP with
// a selector Kubernetes would refuse is an error naming the file and the field.
TEST_F(ManifestTest, EgressIPNamespacesAndPods) {
    write("eip.yaml", R"(apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {env: prod}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels: {app: web}
spec: {nodeName: worker-1}
status:
  phase: Running
  podIPs: [{ip: 10.128.0.5}, {ip: "fd00::5"}]
---
apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: prod}
spec:
  egressIPs: [192.0.2.10]
  namespaceSelector: {matchLabels: {env: prod}}
  podSelector:
    matchExpressions: [{key: app, operator: NotIn, values: [db]}]
)");
    ManifestDir md(dir.string());
    auto r = md.scan();
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    const auto& objs = md.objects();
    ASSERT_EQ(objs.namespaces.count("shop"), 1u);
    EXPECT_EQ(objs.namespaces.at("shop").meta.labels.at("env"), "prod");
    ASSERT_EQ(objs.pods.count("default/web-1"), 1u);
    EXPECT_EQ(objs.pods.at("default/web-1").ips.size(), 2u);
    ASSERT_EQ(objs.egress_ips.count("prod"), 1u);
    EXPECT_EQ(objs.egress_ips.at("prod").pod_selector.match_expressions.at(0).op, "NotIn");

    write("bad.yaml", R"(apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: bad}
spec:
  egressIPs: [192.0.2.11]
  namespaceSelector:
    matchExpressions: [{key: env, operator: Exists, values: [prod]}]
)");
    r = md.scan();
    ASSERT_EQ(r.errors.size(), 1u) << joined(r.errors);
    EXPECT_NE(r.errors[0].find("bad.yaml"), std::string::npos) << r.errors[0];
    EXPECT_NE(r.errors[0].find("spec.namespaceSelector.matchExpressions[0].values: operator Exists takes no values"),
              std::string::npos)
        << r.errors[0];
    EXPECT_EQ(md.objects().egress_ips.count("bad"), 0u);
    EXPECT_EQ(md.objects().egress_ips.count("prod"), 1u);  // the rest is kept
}

// EgressQoS objects (no model::Object kind of their own) are read beside the others: namespace
// "default" when none is given, errors with the JSON path, a change is a change of the scan, a
// duplicate across files reported, a pod's labels read from the same directory.
TEST_F(ManifestTest, EgressQosIsReadBesideTheOtherKinds) {
    const std::string qos =
        "apiVersion: k8s.ovn.org/v1\nkind: EgressQoS\nmetadata:\n  name: default\nspec:\n"
        "  egress:\n  - dscp: 46\n    dstCIDR: 192.0.2.0/24\n    podSelector:\n"
        "      matchLabels: {app: voice}\n  - dscp: 8\n";
    const std::string pod =
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {app: voice}\n"
        "status:\n  phase: Running\n  podIP: 10.244.1.10\n";
    write("qos.yaml", qos + "---\n" + pod);
    ManifestDir md(dir.string());
    auto r = md.scan();
    EXPECT_TRUE(r.changed);
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    ASSERT_EQ(md.egress_qoses().size(), 1u);
    const egw::model::EgressQoS& q = md.egress_qoses().at("default/default");
    ASSERT_EQ(q.rules.size(), 2u);
    EXPECT_EQ(q.rules[0].dscp, 46);
    EXPECT_EQ(q.rules[1].dscp, 8);
    EXPECT_EQ(md.objects().pods.at("default/p").meta.labels.at("app"), "voice");

    write("qos.yaml", qos + "  - dscp: 99\n");
    r = md.scan();
    EXPECT_FALSE(r.changed);
    ASSERT_GE(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0], "qos.yaml: document 1: $.spec.egress[2].dscp: expected an integer 0-63, got 99");
    EXPECT_EQ(md.egress_qoses().at("default/default").rules.size(), 2u);  // the last good version

    write("qos.yaml", qos + "  - dscp: 10\n");
    r = md.scan();
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(md.egress_qoses().at("default/default").rules.size(), 3u);

    write("z.yaml", qos);
    r = md.scan();
    EXPECT_FALSE(r.changed);
    ASSERT_EQ(r.errors.size(), 1u) << joined(r.errors);
    EXPECT_EQ(r.errors[0], "z.yaml: EgressQoS default/default: also defined in qos.yaml, which is used");

    remove("z.yaml");
    remove("qos.yaml");
    EXPECT_TRUE(md.scan().changed);
    EXPECT_TRUE(md.egress_qoses().empty());
}

// EgressFirewall manifests are read like the other kinds (namespaced: "default" when left out);
// one with a bad rule is an error naming the file and the rule's path, and the rest is kept.
TEST_F(ManifestTest, EgressFirewall) {
    write("fw.yaml", R"(apiVersion: k8s.ovn.org/v1
kind: EgressFirewall
metadata: {name: default, namespace: shop}
spec:
  egress:
  - type: Allow
    to: {cidrSelector: 192.0.2.0/24}
    ports: [{protocol: TCP, port: 443}]
  - type: Deny
    to: {cidrSelector: 0.0.0.0/0}
)");
    ManifestDir md(dir.string());
    auto r = md.scan();
    EXPECT_TRUE(r.errors.empty()) << joined(r.errors);
    ASSERT_EQ(md.objects().egress_firewalls.count("shop/default"), 1u);
    const auto& fw = md.objects().egress_firewalls.at("shop/default");
    ASSERT_EQ(fw.rules.size(), 2u);
    EXPECT_EQ(fw.rules[0].ports.at(0).port, 443);
    EXPECT_EQ(fw.rules[1].action, egw::model::FirewallAction::deny);

    write("bad-fw.yaml", R"(apiVersion: k8s.ovn.org/v1
kind: EgressFirewall
metadata: {name: default}
spec:
  egress:
  - type: Reject
    to: {cidrSelector: 192.0.2.0/24}
)");
    r = md.scan();
    ASSERT_EQ(r.errors.size(), 1u) << joined(r.errors);
    EXPECT_NE(r.errors[0].find("bad-fw.yaml"), std::string::npos) << r.errors[0];
    EXPECT_NE(r.errors[0].find("spec.egress[0].type: expected one of Allow, Deny"), std::string::npos) << r.errors[0];
    EXPECT_EQ(md.objects().egress_firewalls.count("default/default"), 0u);
    EXPECT_EQ(md.objects().egress_firewalls.count("shop/default"), 1u);
}
