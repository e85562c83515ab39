// The address a rank's Gloo transport listens on and advertises to the other ranks. Gloo's default
// (the machine's name, resolved) is 127.0.0.1 on hosts whose /etc/hosts maps their name to
// loopback, which no other node can reach; so the choice is explicit, in this order:
//   1. an address given by --bind-addr (the launcher passes it to its ranks as TRAINER_BIND_ADDR);
//   2. the IPv4 address of the interface named by TRAINER_SOCKET_IFNAME, or by torch's
//      GLOO_SOCKET_IFNAME when that is unset;
//   3. the address of the local interface that routes to the master (a UDP socket connected to
//      the master's address, then getsockname: the kernel's own route lookup, no packet sent).
// Whatever is chosen must be bindable here, or it is an Error that names it and the flag and
// variable that choose another.
#pragma once
#include <string>

namespace tr::distributed {

struct BindAddress {
  std::string address;    // numeric, IPv4 or IPv6
  std::string interface;  // the interface holding it ("" when none does, e.g. a wildcard)
  std::string reason;     // why it was chosen, for the one line a node prints
  bool by_user = false;   // from the flag or an interface variable, not the route
};

// bind_addr: the explicit address ("" when none was given). Reads TRAINER_SOCKET_IFNAME and
// GLOO_SOCKET_IFNAME from the environment.
BindAddress choose_bind_address(const std::string& master_addr, const std::string& bind_addr);

// The IPv4 address of interface `ifname`; an Error naming it and the interfaces there are.
std::string interface_address(const std::string& ifname);

// "gloo: binding 10.0.0.2 (eth1): the interface that routes to the master 10.0.0.1"
std::string describe(const BindAddress& b);

}  // namespace tr::distributed
