#include "scale/counting_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace tightrope::bench {

namespace {

int connect_loopback(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Content-Length of a request head, 0 when it has none.
size_t content_length(std::string head) {
  std::transform(head.begin(), head.end(), head.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const size_t at = head.find("\r\ncontent-length:");
  if (at == std::string::npos) {
    return 0;
  }
  return std::stoul(head.substr(at + 17, head.find("\r\n", at + 2) - at - 17));
}

}  // namespace

CountingProxy::CountingProxy(std::string upstream_host, int upstream_port, int listen_port)
    : upstream_host_(std::move(upstream_host)), upstream_port_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(listen_port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    throw std::runtime_error("counting proxy: cannot listen on 127.0.0.1:" +
                             std::to_string(listen_port));
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

CountingProxy::~CountingProxy() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  // Relays look at stopping_ every 200 ms.
  while (open_relays_.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::map<std::string, int64_t> CountingProxy::by_route() const {
  std::lock_guard lock(mu_);
  return routes_;
}

void CountingProxy::count(const std::string& request_line) {
  ++requests_;
  // "GET /slurm/v0.0.44/nodes?update_time=... HTTP/1.1" -> "GET /slurm/v0.0.44/nodes"
  std::string route = request_line.substr(0, request_line.rfind(' '));
  route = route.substr(0, route.find('?'));
  std::lock_guard lock(mu_);
  ++routes_[route];
}

void CountingProxy::accept_loop() {
  while (!stopping_) {
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    if (client < 0) {
      continue;
    }
    ++open_relays_;
    std::thread([this, client] {
      relay(client);
      --open_relays_;
    }).detach();
  }
}

void CountingProxy::relay(int client) {
  const int upstream = connect_loopback(upstream_host_, upstream_port_);
  if (upstream < 0) {
    ::close(client);
    return;
  }
  std::string head;      // the request head being read
  size_t body_left = 0;  // body bytes of the current request still to pass
  char buffer[65536];
  pollfd fds[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
  while (!stopping_) {
    if (::poll(fds, 2, 200) <= 0) {
      continue;
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
      if (n <= 0 || !send_all(upstream, buffer, static_cast<size_t>(n))) {
        break;
      }
      size_t at = 0;
      const auto size = static_cast<size_t>(n);
      while (at < size) {
        if (body_left > 0) {
          const size_t skip = std::min(body_left, size - at);
          body_left -= skip;
          at += skip;
          continue;
        }
        head.push_back(buffer[at++]);
        if (head.size() >= 4 && head.compare(head.size() - 4, 4, "\r\n\r\n") == 0) {
          count(head.substr(0, head.find("\r\n")));
          body_left = content_length(head);
          head.clear();
        }
      }
    }
    if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::recv(upstream, buffer, sizeof buffer, 0);
      if (n <= 0 || !send_all(client, buffer, static_cast<size_t>(n))) {
        break;
      }
      bytes_answered_ += n;
    }
  }
  ::close(upstream);
  ::close(client);
}

}  // namespace tightrope::bench
