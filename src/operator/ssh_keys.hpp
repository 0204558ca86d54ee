// SSH host keys for login pods, made once per LoginSet and kept in a Secret so that users'
// known_hosts stay valid across pod restarts: RSA 3072 and ECDSA P-256 as PEM, Ed25519 in
// OpenSSH's own format (sshd reads no other for it).
#pragma once

#include <map>
#include <string>

namespace tightrope::op {

// File name under /etc/ssh ("ssh_host_rsa_key", ...) -> private key text.
std::map<std::string, std::string> generate_ssh_host_keys();

}  // namespace tightrope::op
