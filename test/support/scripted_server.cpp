#include "scripted_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace tightrope::testing {
namespace {

// Reads the request's head and returns its first line; a body, which no script needs, is left
// unread. Gives up when the server stops.
std::string read_request_line(int fd, const std::atomic<bool>& stopping) {
  std::string head;
  char buffer[4096];
  while (head.find("\r\n\r\n") == std::string::npos && !stopping) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) {
      continue;
    }
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      break;
    }
    head.append(buffer, static_cast<size_t>(n));
  }
  return head.substr(0, head.find("\r\n"));
}

}  // namespace

bool Exchange::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void Exchange::hold(std::chrono::milliseconds duration) {
  const auto until = std::chrono::steady_clock::now() + duration;
  std::unique_lock lock(mu_);
  while (!stopping_ && std::chrono::steady_clock::now() < until) {
    lock.unlock();
    pollfd p{fd_, POLLRDHUP, 0};
    const bool gone = ::poll(&p, 1, 0) > 0;
    lock.lock();
    if (gone) {
      return;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stopping_.load(); });
  }
}

ScriptedServer::ScriptedServer(Script script) : script_(std::move(script)) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t length = sizeof addr;
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener_, 16) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    throw std::runtime_error("scripted server: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { serve(); });
}

ScriptedServer::~ScriptedServer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  ::close(listener_);
}

std::string ScriptedServer::url() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

std::vector<std::string> ScriptedServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

void ScriptedServer::serve() {
  while (!stopping_) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) {
      continue;
    }
    const int fd = ::accept(listener_, nullptr, nullptr);
    if (fd < 0) {
      continue;
    }
    const std::string line = read_request_line(fd, stopping_);
    {
      std::lock_guard lock(mu_);
      requests_.push_back(line);
    }
    Exchange exchange(fd, stopping_, mu_, cv_);
    script_(line, exchange);
    ::close(fd);
  }
}

std::string http_answer(int status, std::string_view body, std::string_view content_type) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " Scripted\r\nContent-Type: ";
  out.append(content_type);
  out += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  out.append(body);
  return out;
}

std::string http_head_without_length(int status, std::string_view content_type) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " Scripted\r\nContent-Type: ";
  out.append(content_type);
  out += "\r\nConnection: close\r\n\r\n";
  return out;
}

}  // namespace tightrope::testing
