// What RestApi, Accounting, LoginSet and Token resources become. Pure: the reconcilers read the
// Controller, Secrets and existing keys, pass them in, and apply what comes out.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.hpp"

namespace tightrope::op::build {

// ---- RestApi: slurmrestd in JWT daemon mode, reading slurm.conf from the Controller's
// ConfigMap.
struct RestApiInputs {
  api::Controller controller;
  std::string config_hash;  // the Controller's slurm.conf hash: a new one restarts slurmrestd
  std::string slurm_key_hash;
};
std::string restapi_name(const api::RestApi& r);  // <cr>-restapi (Deployment and Service)
nlohmann::json build_restapi_deployment(const api::RestApi& r, const RestApiInputs& in);
nlohmann::json build_restapi_service(const api::RestApi& r);
std::vector<nlohmann::json> build_restapi_objects(const api::RestApi& r, const RestApiInputs& in);

// ---- Accounting: slurmdbd in front of an existing MySQL/MariaDB.
struct AccountingInputs {
  std::string storage_password;  // from storageConfig.passwordKeyRef
  std::string slurm_key_hash;
  std::string jwt_key_hash;
};
std::string accounting_name(const api::Accounting& a);  // <cr>-accounting
std::string build_slurmdbd_conf(const api::Accounting& a, const AccountingInputs& in);
// The problems build_slurmdbd_conf cannot fix: extraConf that does not parse or sets what the
// operator owns.
std::vector<std::string> owned_slurmdbd_conf_keys();
nlohmann::json build_accounting_secret(const api::Accounting& a, const AccountingInputs& in);
nlohmann::json build_accounting_statefulset(const api::Accounting& a, const AccountingInputs& in);
nlohmann::json build_accounting_service(const api::Accounting& a);
// External: nothing (slurmdbd runs elsewhere).
std::vector<nlohmann::json> build_accounting_objects(const api::Accounting& a,
                                                     const AccountingInputs& in);

// ---- LoginSet: sackd + sshd + SSSD.
struct LoginSetInputs {
  api::Controller controller;
  // The SSH host keys Secret's data (file name -> PEM), generated once and kept.
  std::map<std::string, std::string> host_keys;
  std::string slurm_key_hash;
  std::string sssd_conf_hash;  // of the sssd.conf spec.sssdConfRef names
};
std::string loginset_name(const api::LoginSet& l);             // <cr> (Deployment and Service)
std::string loginset_host_keys_name(const api::LoginSet& l);   // <cr>-ssh-host-keys
std::string loginset_ssh_config_name(const api::LoginSet& l);  // <cr>-ssh-config
// The host keys sshd_config names, under /etc/ssh: what generate_ssh_host_keys makes.
inline constexpr std::array<std::string_view, 3> kSshHostKeyFiles = {
    "ssh_host_rsa_key", "ssh_host_ecdsa_key", "ssh_host_ed25519_key"};
// sshd_config of login pods and of NodeSet pods with spec.ssh: PAM (SSSD's account checks,
// pam_slurm_adopt on workers), keys from ~/.ssh and from SSSD, then the CR's extraSshdConfig.
std::string build_sshd_config(const std::string& kind, const api::ObjectMeta& owner,
                              const std::string& extra);
std::string build_sshd_config(const api::LoginSet& l);
nlohmann::json build_loginset_host_keys_secret(const api::LoginSet& l, const LoginSetInputs& in);
nlohmann::json build_loginset_ssh_config_map(const api::LoginSet& l);
nlohmann::json build_loginset_deployment(const api::LoginSet& l, const LoginSetInputs& in);
nlohmann::json build_loginset_service(const api::LoginSet& l);
std::vector<nlohmann::json> build_loginset_objects(const api::LoginSet& l,
                                                   const LoginSetInputs& in);

// ---- Token: a JWT in a Secret.
// The Secret holding `jwt` (under spec.secretRef's key), immutable when refresh is off.
nlohmann::json build_token_secret(const api::Token& t, const std::string& jwt,
                                  std::chrono::system_clock::time_point issued_at,
                                  std::chrono::system_clock::time_point expires_at);
// When a token issued at `issued_at` must be replaced: 80 % of its lifetime.
std::chrono::system_clock::time_point token_refresh_at(
    std::chrono::system_clock::time_point issued_at, std::chrono::seconds lifetime);

}  // namespace tightrope::op::build
