#include "distributed/bind_address.h"
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include "core/error.h"

namespace tr::distributed {

namespace {

const char* kHowToChoose =
    "choose the address with `trainer run --bind-addr ADDR` or the interface with "
    "TRAINER_SOCKET_IFNAME=<interface>";

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string numeric(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

bool is_loopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  return false;
}

// The addresses `host` resolves to, port `port` (numeric hosts need no resolver).
struct Resolved {
  addrinfo* list = nullptr;
  Resolved(const std::string& host, const char* port, const char* what, int flags = 0) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_flags = flags;
    const int rc = ::getaddrinfo(host.c_str(), port, &hints, &list);
    TR_CHECK(rc == 0 && list, "cannot resolve ", what, " '", host, "': ", ::gai_strerror(rc));
  }
  ~Resolved() { ::freeaddrinfo(list); }
};

// The interface holding `address` ("" when none does).
std::string interface_of(const std::string& address) {
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return "";
  std::string name;
  for (ifaddrs* i = ifs; i && name.empty(); i = i->ifa_next)
    if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6) &&
        numeric(i->ifa_addr) == address)
      name = i->ifa_name;
  ::freeifaddrs(ifs);
  return name;
}

// The local address the kernel would send from to reach the master: a UDP connect() only looks up
// the route (no packet leaves), getsockname() reads the source address it picked.
BindAddress route_to(const std::string& master_addr) {
  Resolved master(master_addr, "9", "the master address");  // any port: nothing is sent
  const sockaddr* to = master.list->ai_addr;
  Fd s{::socket(to->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  TR_CHECK(s.fd >= 0, "cannot open a socket to find the route to the master ", master_addr, ": ", std::strerror(errno));
  TR_CHECK(::connect(s.fd, to, master.list->ai_addrlen) == 0, "no route from this host to the master ", master_addr,
           " (", numeric(to), "): ", std::strerror(errno), "; ", kHowToChoose);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  TR_CHECK(::getsockname(s.fd, reinterpret_cast<sockaddr*>(&local), &len) == 0,
           "cannot read the local address that routes to the master ", master_addr, ": ", std::strerror(errno));
  const sockaddr* from = reinterpret_cast<const sockaddr*>(&local);
  BindAddress b;
  b.address = numeric(from);
  b.interface = interface_of(b.address);
  if (is_loopback(to)) {
    b.reason = str("the master ", master_addr, " is on this host");
  } else {
    // other nodes cannot reach a loopback address; the route lookup should never give one here
    TR_CHECK(!is_loopback(from), "the route to the master ", master_addr, " leaves from the loopback address ",
             b.address, ", which the other nodes cannot reach; ", kHowToChoose);
    b.reason = str("the interface that routes to the master ", master_addr);
  }
  return b;
}

// Binds a TCP socket to address:0 and lets it go: the error Gloo would give later, said now with
// what to do about it.
void check_bindable(const BindAddress& b) {
  Resolved a(b.address, "0", "the bind address", AI_NUMERICHOST);  // port 0: any free one
  Fd s{::socket(a.list->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  TR_CHECK(s.fd >= 0, "cannot open a socket to check the bind address ", b.address, ": ", std::strerror(errno));
  TR_CHECK(::bind(s.fd, a.list->ai_addr, a.list->ai_addrlen) == 0, "cannot bind the address ", b.address, " (",
           b.reason, "): ", std::strerror(errno), "; ", kHowToChoose);
}

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace

std::string interface_address(const std::string& ifname) {
  ifaddrs* ifs = nullptr;
  TR_CHECK(::getifaddrs(&ifs) == 0, "cannot list the network interfaces: ", std::strerror(errno));
  std::string address;
  std::set<std::string> names;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    names.insert(i->ifa_name);
    if (address.empty() && ifname == i->ifa_name && i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
      address = numeric(i->ifa_addr);
  }
  ::freeifaddrs(ifs);
  if (!address.empty()) return address;
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  TR_CHECK(!names.count(ifname), "the network interface '", ifname, "' has no IPv4 address; ", kHowToChoose);
  throw Error(
      str("there is no network interface '", ifname, "' on this host (there are: ", known, "); ", kHowToChoose));
}

BindAddress choose_bind_address(const std::string& master_addr, const std::string& bind_addr) {
  BindAddress b;
  if (!bind_addr.empty()) {
    b.address = bind_addr;
    b.interface = interface_of(bind_addr);
    b.reason = "given by --bind-addr";
    b.by_user = true;
  } else if (const char* var = env_or_null("TRAINER_SOCKET_IFNAME") ? "TRAINER_SOCKET_IFNAME"
                               : env_or_null("GLOO_SOCKET_IFNAME")  ? "GLOO_SOCKET_IFNAME"
                                                                    : nullptr) {
    b.interface = std::getenv(var);
    b.address = interface_address(b.interface);
    b.reason = str("set by ", var);
    b.by_user = true;
  } else {
    b = route_to(master_addr);
  }
  check_bindable(b);
  return b;
}

std::string describe(const BindAddress& b) {
  return str("gloo: binding ", b.address, " (", b.interface.empty() ? "no interface holds it" : b.interface,
             "): ", b.reason);
}

}  // namespace tr::distributed
