// SPDX-License-Identifier: Apache-2.0
//
// Fuzz target: the kubeconfig reader (control/k8s/credentials.cpp), through from_kubeconfig() on a
// real file, and base64_decode. The first byte picks the context: the current-context, or one of
// the names the seeds use. Any text gives credentials or a CredentialError, nothing else; usable
// credentials name a server.
#include <string>

#include "control/k8s/credentials.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/temp_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace egw;
    fuzz::Reader in(data, size);
    static const char* const kContexts[] = {"", "", "kind-egw", "other"};
    const std::string context = kContexts[in.byte() & 3];
    const std::string text = in.take();

    try {
        (void)k8s::base64_decode(text);
    } catch (const k8s::CredentialError&) {
    }

    const std::string path = fuzz::temp_dir() + "/kubeconfig";
    fuzz::write_file(path, text);
    try {
        k8s::Credentials c = k8s::from_kubeconfig(path, context);
        if (c.server.empty()) fuzz::fail("a kubeconfig was accepted without a server");
        if (!c.server.empty() && c.server.back() == '/') fuzz::fail("the server keeps a trailing '/': " + c.server);
    } catch (const k8s::CredentialError&) {
    }
    return 0;
}
