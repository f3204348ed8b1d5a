// SPDX-License-Identifier: Apache-2.0
//
// Where the API server is and how egwd proves who it is: in-cluster (the pod's service account)
// or a kubeconfig file. See docs/kubernetes.md.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace egw::k8s {

// A kubeconfig or service-account mount that cannot be used. what() names the file and the field.
class CredentialError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Credentials {
    std::string server;   // "https://10.96.0.1:443", without a trailing '/'
    std::string ca_file;  // PEM bundle the server certificate must chain to
    std::string ca_pem;   // the same given inline (certificate-authority-data)
    bool insecure_skip_tls_verify = false;
    std::string token;             // bearer token given inline
    std::string token_file;        // bearer token read from a file, re-read periodically and on 401
    std::string client_cert_file;  // client certificate (PEM), as a file...
    std::string client_cert_pem;   // ...or inline
    std::string client_key_file;
    std::string client_key_pem;
    std::string namespace_;  // the namespace egwd runs in, "" when unknown
    std::string source;      // "in-cluster" or "kubeconfig <file> context <name>", for logs
};

// The files of a pod's service-account mount.
struct InClusterPaths {
    std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
    std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
    std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};

// In-cluster credentials: the API server at $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
// (else _PORT_HTTPS, else 443), the service-account token (kept as token_file so that it is
// re-read) and CA. Throws CredentialError when the variables or the token are missing.
Credentials in_cluster(const InClusterPaths& paths = {});

// Credentials from a kubeconfig. `path` may list several files separated by ':' as $KUBECONFIG
// does (the first file to define a name or current-context wins). `context` empty = the
// current-context. Relative file names inside a kubeconfig are relative to its directory.
// Supported: server, certificate-authority(-data), insecure-skip-tls-verify, token, tokenFile,
// client-certificate(-data), client-key(-data), the context's namespace. Exec and auth-provider
// plugins and basic auth are not: a user relying only on them is a CredentialError.
Credentials from_kubeconfig(const std::string& path, const std::string& context = "");

// What egwd uses: `kubeconfig` when not empty, else $KUBECONFIG when set, else in-cluster when
// $KUBERNETES_SERVICE_HOST is set, else ~/.kube/config.
Credentials load_credentials(const std::string& kubeconfig = "", const std::string& context = "");

// Standard base64 (with or without padding, whitespace ignored). Throws CredentialError on a
// character outside the alphabet.
std::string base64_decode(std::string_view in);

}  // namespace egw::k8s
