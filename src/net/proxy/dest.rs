//! Where the egress proxy never connects, whatever name a job asked for and
//! whatever the allowlist says: this machine (loopback, the unspecified
//! address, any address of its own interfaces: its loopback-only services
//! and the engine's TCP socket among them), link-local addresses (cloud
//! metadata services), multicast and broadcast, and the subnets of this
//! machine's bridges (other containers, other jobs). An allowed name that
//! resolves there (a DNS answer a job's host name points anywhere) is a
//! denial like any other.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// This machine's own addresses and its bridges' subnets, read when asked.
#[derive(Debug, Default, Clone)]
pub struct Local {
    addrs: Vec<IpAddr>,
    /// (network address, prefix length) of each bridge interface.
    bridges: Vec<(IpAddr, u8)>,
}

impl Local {
    /// The interfaces as they are now (a job network made a moment ago
    /// included). Unreadable interfaces give an empty view: the fixed
    /// rules (loopback, link-local …) still hold.
    pub fn now() -> Local {
        let mut local = Local::default();
        let Ok(list) = nix::ifaddrs::getifaddrs() else {
            return local;
        };
        for ifa in list {
            let (Some(addr), mask) = (
                ifa.address.as_ref().and_then(ip_of),
                ifa.netmask.as_ref().and_then(ip_of),
            ) else {
                continue;
            };
            local.addrs.push(addr);
            let bridge = Path::new("/sys/class/net")
                .join(&ifa.interface_name)
                .join("bridge")
                .exists();
            if let (true, Some(mask)) = (bridge, mask) {
                let prefix = prefix_len(mask);
                local.bridges.push((network(addr, prefix), prefix));
            }
        }
        local
    }

    /// Why the proxy must not connect to `ip`, or `None` when it may.
    pub fn refuses(&self, ip: IpAddr) -> Option<&'static str> {
        let ip = canonical(ip);
        if ip.is_loopback() || ip.is_unspecified() {
            return Some("a loopback address of this machine");
        }
        if link_local(ip) {
            return Some("a link-local address");
        }
        if ip.is_multicast() || ip == IpAddr::V4(Ipv4Addr::BROADCAST) {
            return Some("a multicast or broadcast address");
        }
        if self.addrs.iter().any(|a| canonical(*a) == ip) {
            return Some("an address of this machine");
        }
        if self
            .bridges
            .iter()
            .any(|(net, prefix)| network(ip, *prefix) == *net && same_family(ip, *net))
        {
            return Some("an address on a container network of this machine");
        }
        None
    }
}

fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

/// An IPv4 address written as IPv6 (`::ffff:127.0.0.1`) is the IPv4 one.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

fn ip_of(s: &nix::sys::socket::SockaddrStorage) -> Option<IpAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(IpAddr::V4(v4.ip()));
    }
    s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
}

fn prefix_len(mask: IpAddr) -> u8 {
    match mask {
        IpAddr::V4(m) => u32::from(m).count_ones() as u8,
        IpAddr::V6(m) => u128::from(m).count_ones() as u8,
    }
}

/// `ip` with all but its first `prefix` bits cleared.
pub fn network(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let mask = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - prefix.min(32) as u32)
            };
            IpAddr::V4(Ipv4Addr::from(bits & mask))
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let mask = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - prefix.min(128) as u32)
            };
            IpAddr::V6(Ipv6Addr::from(bits & mask))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn this_machine_metadata_and_container_networks_are_refused() {
        let local = Local {
            addrs: vec![ip("192.0.2.2"), ip("172.18.0.1")],
            bridges: vec![(ip("172.18.0.0"), 16)],
        };
        for refused in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "0.0.0.0",
            "::",
            "::ffff:127.0.0.1",
            "169.254.169.254",
            "fe80::1",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.2",
            "172.18.0.1",
            "172.18.3.4",
            "::ffff:172.18.0.7",
        ] {
            assert!(local.refuses(ip(refused)).is_some(), "{refused}");
        }
        for allowed in ["151.101.0.223", "10.251.8.2", "172.19.0.2", "2a04:4e42::223"] {
            assert_eq!(local.refuses(ip(allowed)), None, "{allowed}");
        }
        assert_eq!(network(ip("172.18.200.7"), 16), ip("172.18.0.0"));
        assert_eq!(network(ip("fd00::abcd"), 64), ip("fd00::"));
    }

    #[test]
    fn the_real_interfaces_include_loopback() {
        let local = Local::now();
        assert!(local.addrs.iter().any(|a| a.is_loopback()), "{local:?}");
    }
}
